import Testing
@testable import SpeakBridgeDiscovery

@Suite("TXT records")
struct TXTRecordTests {
    @Test("valid entries keep the caller's order")
    func validKeepsOrder() throws {
        let entries = try TXTRecord.validate([("v", "1"), ("id", "7RQ4-K2M9-XW3D-8HNP"), ("flag", "")])
        #expect(entries.map(\.key) == ["v", "id", "flag"])
        #expect(entries[1].value == "7RQ4-K2M9-XW3D-8HNP")
    }

    @Test("invalid keys are rejected", arguments: ["", "a=b", "tab\there", "é", "del\u{7F}"])
    func invalidKeys(key: String) {
        #expect(throws: DiscoveryError.self) { try TXTRecord.validate([(key, "x")]) }
    }

    @Test("a key may appear once, case-insensitively")
    func duplicateKey() {
        #expect(throws: DiscoveryError.self) { try TXTRecord.validate([("id", "1"), ("ID", "2")]) }
    }

    @Test("an entry may be at most 255 bytes")
    func entryLength() throws {
        _ = try TXTRecord.validate([("k", String(repeating: "x", count: 253))])     // 1 + 1 + 253
        #expect(throws: DiscoveryError.self) {
            try TXTRecord.validate([("k", String(repeating: "x", count: 254))])
        }
        // UTF-8 bytes count, not characters
        #expect(throws: DiscoveryError.self) {
            try TXTRecord.validate([("k", String(repeating: "é", count: 127))])       // 2 + 254
        }
    }

    @Test("decoding: first occurrence wins, keys lowercased, bare keys are empty")
    func decode() {
        let raw: [[UInt8]] = [
            Array("V=1".utf8), Array("id=ABC".utf8), Array("v=2".utf8), Array("paired".utf8),
            [], Array("=orphan".utf8), Array("eq=a=b".utf8),
        ]
        #expect(TXTRecord.decode(raw) == ["v": "1", "id": "ABC", "paired": "", "eq": "a=b"])
    }

    @Test("decoding: invalid UTF-8 in a value does not fail")
    func decodeInvalidUTF8() {
        let decoded = TXTRecord.decode([Array("k=".utf8) + [0xFF, 0x41]])
        #expect(decoded["k"] == "\u{FFFD}A")
    }

    @Test("errors carry a message and a hint")
    func errorText() {
        let error = DiscoveryError.noDaemon("cannot reach avahi-daemon")
        #expect(error.description.contains("cannot reach avahi-daemon"))
        #expect(error.hint.contains("avahi-daemon"))
    }
}
