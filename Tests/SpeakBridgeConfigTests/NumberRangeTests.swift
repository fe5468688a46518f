import Foundation
import SpeakBridgeConfig
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// Numbers lie within ±(2^53 − 1) at every entry point: `config set` (`init(parsing:)`), a peer's offer, a
/// `settings.json` read from disk, and a value built in code. Found by review: integers up to ±2^63 were accepted
/// and sent, which a JSON reader holding numbers as doubles rounds (2^53 + 1 reads as 2^53), and a peer's integer
/// past Int64 was stored as a rounded double.
@Suite("Config values: numbers within ±(2^53 − 1)")
struct NumberRangeTests {
    static let max: Int64 = 9_007_199_254_740_991  // 2^53 − 1
    static let tooLarge = ["9007199254740992", "9007199254740993", "-9007199254740992", "-9007199254740993",
                           "9223372036854775807", "-9223372036854775808", "9223372036854775808",
                           "-99999999999999999999", "18446744073709551617"]

    @Test("config set: ±(2^53 − 1) are integers; 2^53, 2^53 + 1, their negatives and more are refused, not turned into text")
    func parsing() throws {
        #expect(try ConfigValue(parsing: "9007199254740991", key: "n") == .integer(Self.max))
        #expect(try ConfigValue(parsing: "-9007199254740991", key: "n") == .integer(-Self.max))
        for text in Self.tooLarge + ["9007199254740992.0", "1e16", "-1e300", "1e400"] {
            var code: ConfigError.Code?
            do { _ = try ConfigValue(parsing: text, key: "n") } catch { code = error.code }
            #expect(code == .tooLarge, "\(text)")
        }
        #expect(try ConfigValue(parsing: "9007199254740993", key: "n", forceString: true) == .string("9007199254740993"))
        #expect(try ConfigValue(parsing: "0.3", key: "n") == .double(0.3))
        #expect(try ConfigValue(parsing: "1e15", key: "n") == .double(1e15))
    }

    @Test("a peer's offer: the edges apply exactly; beyond them too-large naming the batch, nothing stored")
    func peerOffer() throws {
        var pair = try MachinePair("numbers")
        defer { pair.remove() }
        try pair.desk.policy(.accept)
        func offer(_ batch: String, _ number: String, counter: UInt16 = 0) -> String {
            let v = HLCTimestamp(ms: pair.desk.clock.ms, counter: counter, device: pair.phone.id).description
            return #"{"type":"config-offer","batch":"\#(batch)","part":1,"parts":1,"entries":[{"key":"ui.ok","version":"\#(v)","value":1},{"key":"n.value","version":"\#(v)","value":\#(number)}]}"#
        }
        for (i, text) in Self.tooLarge.enumerated() {
            let answers = try pair.deskAnswers(offer("b\(i)", text))
            #expect(answers.count == 1 && answers[0].hasPrefix(#"{"type":"config-error","batch":"b\#(i)","code":"too-large""#), "\(text): \(answers)")
            #expect(!(answers.first ?? "").contains(text), "the value is not echoed")
        }
        #expect(try pair.desk.value("ui.ok") == nil && pair.desk.value("n.value") == nil, "nothing of a refused batch applies")
        #expect(try pair.desk.store.read().document.pending.isEmpty)

        for (i, number) in [Self.max, -Self.max].enumerated() {
            let answers = try pair.deskAnswers(offer("ok\(i)", String(number), counter: UInt16(i + 1)))
            #expect(answers.first?.contains(#""status":"applied""#) == true, "\(answers)")
            #expect(try pair.desk.value("n.value") == String(number))
            // Stored and sent on exactly: the desktop's own offer of it carries the same digits.
            #expect(String(decoding: ConfigWire.entryJSON(try pair.desk.offer(["n.value"])[0]).encoded(), as: UTF8.self)
                .contains(#""value":\#(number)"#))
        }
    }

    @Test("settings.json with a number beyond the range: a clear error naming the key; the edge itself loads")
    func settingsFile() throws {
        let s = try TestStore("numbers-file", device: device(1))
        defer { s.remove() }
        try s.set("n.value", .integer(Self.max))
        let good = String(decoding: s.fileBytes, as: UTF8.self)
        #expect(good.contains(#""value":9007199254740991"#))
        #expect(try s.store.read().document.records["n.value"]?.body == .value(.integer(Self.max)))
        for text in ["9007199254740992", "-9007199254740993", "18446744073709551617"] {
            try FileIO.atomicWrite(s.home.settingsFile, Array(good.replacingOccurrences(of: "9007199254740991", with: text).utf8))
            var error: ConfigError?
            do { _ = try s.store.read() } catch let e { error = e }
            #expect(error?.message.contains("settings.json") == true && error?.message.contains("n.value") == true,
                    "\(text): \(String(describing: error))")
            #expect(error?.hint?.contains("quotes") == true)
        }
    }

    @Test("a value built in code is held to the same range by set and apply")
    func inCode() throws {
        let s = try TestStore("numbers-code", device: device(1))
        defer { s.remove() }
        #expect(errorCode { try s.set("n.value", .integer(Self.max + 1)) } == .tooLarge)
        #expect(errorCode { try s.set("n.value", .integer(-Self.max - 2)) } == .tooLarge)
        #expect(errorCode { try s.set("n.value", .double(9_007_199_254_740_992)) } == .tooLarge)
        try s.set("n.value", .integer(-Self.max))
        try s.policy(.accept)
        let big = ConfigUpdate(key: "n.other", version: HLCTimestamp(ms: s.clock.ms, counter: 0, device: device(2)),
                               body: .value(.integer(1 << 53)))
        #expect(errorCode { _ = try s.apply([big], from: device(2)) } == .tooLarge)
        #expect(try s.value("n.other") == nil)
    }
}
