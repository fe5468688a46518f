import Testing
@testable import SpeakBridgeDiscovery

/// Issue 12: `discover` returns once every desktop it knows of has answered, not always at the timeout.
@Suite struct DiscoveryStopRuleTests {
    static func service(_ name: String, id: String?, addresses: [String] = ["169.254.90.1"]) -> DiscoveredService {
        DiscoveredService(name: name, hostName: "\(name).local", addresses: addresses, port: 4_000,
                          txt: id.map { ["v": "1", "id": $0] } ?? ["v": "1"], isLocal: false)
    }

    static func stop(_ services: [DiscoveredService], known: Set<String>) -> Bool {
        DiscoveryStopRule.everyKnownAnswered(services, known: known) { $0.txt["id"] }
    }

    @Test func stopsOnceEveryKnownDesktopAnswered() {
        let a = Self.service("A", id: "AAAA"), b = Self.service("B", id: "BBBB"), other = Self.service("X", id: "XXXX")
        #expect(!Self.stop([], known: ["AAAA"]))
        #expect(Self.stop([a], known: ["AAAA"]))
        #expect(!Self.stop([a, other], known: ["AAAA", "BBBB"]))
        #expect(Self.stop([other, b, a], known: ["AAAA", "BBBB"]))
    }

    /// Knowing no desktop, discover looks for new ones: it listens for the whole timeout.
    @Test func withNoKnownDesktopItListensToTheEnd() {
        #expect(!Self.stop([Self.service("A", id: "AAAA")], known: []))
    }

    /// A service without addresses (not resolved yet) or without an ID has not answered.
    @Test func unresolvedOrAnonymousServicesDoNotCount() {
        #expect(!Self.stop([Self.service("A", id: "AAAA", addresses: [])], known: ["AAAA"]))
        #expect(!Self.stop([Self.service("A", id: nil)], known: ["AAAA"]))
    }
}
