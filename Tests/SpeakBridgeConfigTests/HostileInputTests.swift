import SpeakBridgeConfig
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// What a paired but hostile (or buggy) peer may send: every case is an error with a code, and nothing changes.
@Suite("Hostile input from a peer")
struct HostileInputTests {
    let desk = device(1)
    var v: String { HLCTimestamp(ms: 1_700_000_000_000, counter: 0, device: desk).description }

    func entry(_ key: JSONValue, value: JSONValue = .string("x"), version: JSONValue? = nil, extra: [(String, JSONValue)] = []) -> JSONValue {
        .object([("key", key), ("version", version ?? .string(v)), ("value", value)] + extra)
    }

    func offer(_ entries: [JSONValue], batch: JSONValue = .string("b1"), part: Int64 = 1, parts: Int64 = 1) -> JSONValue {
        .object([("batch", batch), ("part", .integer(part)), ("parts", .integer(parts)), ("entries", .array(entries))])
    }

    func code(_ type: String, _ body: JSONValue) -> ConfigError.Code? {
        do {
            _ = try ConfigWire.decode(type: type, body: body)
            return nil
        } catch {
            return error.code
        }
    }

    @Test("unknown types, bad fields, limits")
    func wireRules() {
        #expect(code("config-bogus", .object([])) == .unknownType)
        #expect(code("config-offer", offer([entry(.string("ui.theme"), value: .string(String(repeating: "x", count: 4_097)))])) == .tooLarge)
        #expect(code("config-offer", offer([entry(.string("ui.theme"), value: .string(String(repeating: "x", count: 4_096)))])) == nil)
        for bad in ["", ".a", "a.", "a..b", "1abc", "a b", "a/b", "../x", "é.x", String(repeating: "a", count: 129),
                    "a.b.c.d.e.f.g.h.i", String(repeating: "a", count: 65) + ".b"] {
            #expect(code("config-offer", offer([entry(.string(bad))])) == .malformed, "\(bad)")
        }
        #expect(code("config-offer", offer([entry(.integer(1))])) == .malformed)
        for value: JSONValue in [.null, .array([]), .object([]), .string("a\u{1B}[2J"), .string("\u{202E}txt"), .string("a\u{85}b")] {
            #expect(code("config-offer", offer([entry(.string("ui.x"), value: value)])) == .malformed, "\(value)")
        }
        #expect(code("config-offer", offer([entry(.string("ui.x"), version: .string("yesterday"))])) == .malformed)
        #expect(code("config-offer", offer([entry(.string("ui.x"), version: .integer(5))])) == .malformed)
        #expect(code("config-offer", offer([entry(.string("ui.x"), value: .integer(5), extra: [("secret", .bool(true))])])) == .malformed)
        #expect(code("config-offer", offer([entry(.string("ui.x")), entry(.string("ui.x"))])) == .malformed)
        #expect(code("config-offer", offer((0...256).map { entry(.string("k.k\($0)")) })) == .tooLarge)
        #expect(code("config-offer", offer([], batch: .string("bad batch"))) == .malformed)
        #expect(code("config-offer", offer([], part: 3, parts: 2)) == .malformed)
        #expect(code("config-offer", offer([], part: 1, parts: 65)) == .malformed)
        #expect(code("config-offer", .object([("batch", .string("b")), ("part", .integer(1)), ("parts", .integer(1))])) == .malformed)
        #expect(code("config-pull", .object([("batch", .string("p")), ("keys", .array([.string("devices list")]))])) == .malformed)
        #expect(code("config-pull", .object([("batch", .string("p")), ("keys", .string("all"))])) == .malformed)
        #expect(code("config-result", .object([("batch", .string("p")), ("status", .string("great"))])) == .malformed)
    }

    @Test("a far-future version, a trust key or too many keys: the whole batch is refused and the file is untouched")
    func applyRules() throws {
        let s = try TestStore("hostile", device: device(2))
        defer { s.remove() }
        try s.policy(.accept)
        try s.set("ui.theme", .string("light"))
        let before = s.fileBytes
        let now = s.clock.ms
        let future = ConfigUpdate(key: "ui.theme", version: HLCTimestamp(ms: now + 3_600_000, counter: 0, device: desk),
                                  body: .value(.string("dark")))
        let fine = update("ui.font", "mono", ms: now, by: desk)
        #expect(errorCode { _ = try s.apply([fine, future], from: desk) } == .clock)
        #expect(s.fileBytes == before)
        let many = (0..<ConfigTransaction.maxKeys).map { update("bulk.k\($0)", "x", ms: now, by: desk) }
        #expect(errorCode { _ = try s.apply(many, from: desk) } == .tooLarge)
        #expect(s.fileBytes == before)
        #expect(try s.value("ui.font") == nil)
    }

    @Test("error text from a peer is cleaned before it reaches a terminal")
    func peerText() throws {
        let m = try ConfigWire.decode(type: "config-error", body: .object([("code", .string("x\u{1B}[31m")),
                                                                           ("message", .string("bad\u{1B}]52;c;AAAA\u{07}"))]))
        guard case let .error(_, code, text) = m else { Issue.record("not an error"); return }
        #expect(!code.contains("\u{1B}") && !text.contains("\u{1B}") && !text.contains("\u{07}"))
    }
}
