import Foundation
@testable import SpeakBridgeConfig
import SpeakBridgeProtocol
import Testing

/// Issue 8 row 8: secrets are shared on pull only when the user chose `share all`.
@Suite("Config share mode")
struct ShareModeTests {
    func decode(_ json: String) throws -> ConfigDocument {
        try ConfigDocument.decode(Array(json.utf8))
    }

    @Test("the default share mode is public: a pull gets no secret")
    func defaultIsPublic() {
        #expect(PolicySettings().share == .publicOnly)
        #expect(ConfigDocument().policy.share == .publicOnly)
    }

    @Test("a plain \"share\":\"all\" (the old default, written into every file) is read as public")
    func legacyAllIsPublic() throws {
        #expect(try decode(#"{"version":1,"share":"all"}"#).policy.share == .publicOnly)
        #expect(try decode(#"{"version":1,"share":"all","shareConfirmed":false}"#).policy.share == .publicOnly)
        #expect(try decode(#"{"version":1,"share":"none"}"#).policy.share == .none)
        #expect(try decode(#"{"version":1}"#).policy.share == .publicOnly)
    }

    @Test("share all chosen by the user survives a save and load")
    func confirmedAllRoundTrips() throws {
        var doc = ConfigDocument()
        doc.policy.share = .all
        let text = String(decoding: doc.encoded(), as: UTF8.self)
        #expect(text.contains(#""share":"all","shareConfirmed":true"#))
        #expect(try ConfigDocument.decode(doc.encoded()).policy.share == .all)
        for mode in [ShareMode.publicOnly, .none] {
            doc.policy.share = mode
            #expect(try ConfigDocument.decode(doc.encoded()).policy.share == mode)
        }
    }

    /// A clock past `maxMillis` in an edited or damaged settings.json starts afresh: before, its next tick made a
    /// millisecond past 2^63 - 1 and saving it trapped (`Int64(clock.ms)`).
    @Test("a clock out of range in settings.json is not taken: ticking and saving cannot trap")
    func clockOutOfRange() throws {
        for ms in ["9223372036854775807", "281474976710656"] {
            let text = #"{"version":1,"clock":{"ms":"# + ms + #","counter":65535},"policy":{"default":"ask","devices":{}},"share":"public","localOnly":[],"entries":[]}"#
            var doc = try ConfigDocument.decode(Array(text.utf8))
            #expect(doc.clock.ms == 0)
            _ = doc.clock.tick(now: 1_700_000_000_000, device: device(1))
            #expect(try ConfigDocument.decode(doc.encoded()).clock.ms == 1_700_000_000_000)
        }
    }

    @Test("an offer says how many secrets were withheld; the count survives the wire and the assembler")
    func withheldOnTheWire() throws {
        let v = try HLCTimestamp(parsing: "1700000000000:0:\(device(1).compact)")
        let parts = try ConfigWire.offer(batch: "b-1", origin: .reply,
                                         updates: [ConfigUpdate(key: "a", version: v, body: .value(.string("x")))],
                                         withheld: 3)
        var assembler = BatchAssembler()
        for part in parts {
            guard case .config(let type, let body) = ConfigWire.message(part),
                  case .offer(let decoded) = try ConfigWire.decode(type: type, body: body) else {
                Issue.record("not an offer")
                return
            }
            #expect(decoded.withheld == 3)
            let whole = try assembler.add(decoded)
            #expect(whole?.withheld == 3 && whole?.entries.count == 1)
        }
        for bad in [JSONValue.integer(-1), .integer(1_025), .string("3")] {
            let body = JSONValue.object([("batch", .string("b")), ("part", .integer(1)), ("parts", .integer(1)),
                                         ("entries", .array([])), ("withheld", bad)])
            #expect(throws: ConfigError.self) { try ConfigWire.decode(type: ConfigWire.offerType, body: body) }
        }
    }

    @Test("a pull under the default withholds secrets but offers the rest")
    func pullWithholdsSecrets() throws {
        let s = try TestStore("share", device: device(1))
        defer { s.remove() }
        try s.set("deepgram.apiKey", .string("dg_0123456789abcdef9f3a"), secret: true)
        try s.set("transcription.locale", .string("de-CH"))
        let tx = try s.store.read()
        let share = tx.document.policy.share
        let offered = try tx.offer(keys: nil, includeSecrets: share == .all).map(\.key)
        #expect(offered == ["transcription.locale"])
    }
}
