import SpeakBridgeControl
import SpeakBridgeProtocol
import Testing

/// `status`'s `web` object for a front that starts on demand: offered but not started (and why), or listening.
@Suite("Control seam: the browser front's state")
struct ControlWebFrontTests {
    @Test("not started: enabled, listening false and the reason, nothing else; decodes back")
    func notStarted() throws {
        var status = ControlMessagesTests.status
        status.web = .notStarted("no browser device paired; `speakbridge pair --web` starts it")
        #expect(status.json["web"] == .object([
            ("enabled", .bool(true)), ("listening", .bool(false)),
            ("reason", .string("no browser device paired; `speakbridge pair --web` starts it")),
        ]))
        #expect(try StatusReply(json: status.json) == status)
    }

    @Test("listening: listening true beside url, port, fingerprint, spki, addresses; decodes back")
    func listening() throws {
        var status = ControlMessagesTests.status
        status.web = .init(enabled: true, listening: true, url: "https://192.0.2.1:47811/", port: 47_811,
                           fingerprint: "AB:CD", spki: "base64=", addresses: ["192.0.2.1"])
        guard case .object(let members)? = status.json["web"] else { Issue.record("no web object"); return }
        #expect(members.map(\.0) == ["enabled", "listening", "url", "port", "fingerprint", "spki", "addresses"])
        #expect(try StatusReply(json: status.json) == status)
    }
}
