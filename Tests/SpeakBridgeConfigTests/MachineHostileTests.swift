import Foundation
import SpeakBridgeConfig
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// A hostile (or buggy) peer against the desktop machine, frame by frame: every refusal is one `config-error`
/// with the documented code and `batch` rule, and nothing is stored.
@Suite("Config machine: hostile input")
struct MachineHostileTests {
    func version(_ pair: MachinePair) -> String {
        HLCTimestamp(ms: pair.desk.clock.ms, counter: 0, device: device(2)).description
    }

    /// The code and batch of the one config-error in `answers`.
    func refusal(_ answers: [String]) -> (code: String?, batch: String?, hasBatch: Bool) {
        guard answers.count == 1, let body = try? JSONValue.parse(Array(answers[0].utf8)),
              body["type"]?.stringValue == "config-error" else { return (nil, nil, false) }
        return (body["code"]?.stringValue, body["batch"]?.stringValue, body["batch"] != nil)
    }

    @Test("bad batch IDs: malformed, answered without a batch")
    func badBatch() throws {
        var pair = try MachinePair("h-batch")
        defer { pair.remove() }
        let bad = [#""""#, #""a b""#, #""../x""#, "\"" + String(repeating: "a", count: 65) + "\"", "5", "null", #""é""#]
        for b in bad {
            for frame in [#"{"type":"config-pull","batch":\#(b)}"#,
                          #"{"type":"config-offer","batch":\#(b),"part":1,"parts":1,"entries":[]}"#,
                          #"{"type":"config-result","batch":\#(b),"status":"applied"}"#] {
                let r = refusal(try pair.deskAnswers(frame))
                #expect(r.code == "malformed" && !r.hasBatch, "\(frame)")
            }
        }
        let ok = String(repeating: "a", count: 64)
        #expect(try pair.deskAnswers(#"{"type":"config-pull","batch":"\#(ok)"}"#).first?.contains("config-offer") == true)
        #expect(try pair.deskAnswers(#"{"type":"config-pull","batch":"A-z.0_9"}"#).first?.contains("config-offer") == true)
    }

    @Test("wrong types and missing required members: malformed naming the batch; origin is optional")
    func wrongTypes() throws {
        var pair = try MachinePair("h-types")
        defer { pair.remove() }
        try pair.desk.policy(.accept)
        let v = version(pair)
        let entry = #"{"key":"ui.theme","version":"\#(v)","value":"dark"}"#
        let cases = [
            #"{"type":"config-offer","batch":"b1","part":"1","parts":1,"entries":[]}"#,
            #"{"type":"config-offer","batch":"b1","parts":1,"entries":[]}"#,
            #"{"type":"config-offer","batch":"b1","part":1,"entries":[]}"#,
            #"{"type":"config-offer","batch":"b1","part":1,"parts":1}"#,
            #"{"type":"config-offer","batch":"b1","part":1,"parts":1,"entries":{}}"#,
            #"{"type":"config-offer","batch":"b1","part":1,"parts":1,"entries":[\#(entry)],"withheld":"2"}"#,
            #"{"type":"config-offer","batch":"b1","part":1,"parts":1,"entries":[{"key":"ui.theme","version":5,"value":"x"}]}"#,
            #"{"type":"config-offer","batch":"b1","part":1,"parts":1,"entries":[{"key":"ui.theme","version":"\#(v)","value":[1]}]}"#,
            #"{"type":"config-offer","batch":"b1","part":1,"parts":1,"entries":[{"key":"ui.theme","version":"\#(v)","value":"x","secret":"yes"}]}"#,
            #"{"type":"config-pull","batch":"b1","keys":"all"}"#,
            #"{"type":"config-pull","batch":"b1","keys":[1]}"#,
            #"{"type":"config-result","batch":"b1","status":"great"}"#,
        ]
        for frame in cases {
            let r = refusal(try pair.deskAnswers(frame))
            #expect(r.code == "malformed" && r.batch == "b1", "\(frame)")
        }
        #expect(try pair.desk.value("ui.theme") == nil)
        // `origin` absent, null, of another type or unknown: taken as push; the batch applies.
        for (i, origin) in ["", #","origin":null"#, #","origin":7"#, #","origin":"carrier-pigeon""#].enumerated() {
            let answers = try pair.deskAnswers(#"{"type":"config-offer","batch":"o\#(i)","part":1,"parts":1\#(origin),"entries":[]}"#)
            #expect(answers == [#"{"type":"config-result","batch":"o\#(i)","status":"unchanged","applied":[],"pending":[],"unchanged":[],"skipped":[]}"#])
        }
    }

    @Test("oversized: a value over 4,096 bytes, 257 entries, 257 pull keys, 65 parts: too-large or malformed")
    func oversized() throws {
        var pair = try MachinePair("h-size")
        defer { pair.remove() }
        try pair.desk.policy(.accept)
        let v = version(pair)
        let big = String(repeating: "x", count: 4_097)
        #expect(refusal(try pair.deskAnswers(#"{"type":"config-offer","batch":"b1","part":1,"parts":1,"entries":[{"key":"ui.theme","version":"\#(v)","value":"\#(big)"}]}"#)).code == "too-large")
        let entries = (0...256).map { #"{"key":"k.k\#($0)","version":"\#(v)","deleted":true}"# }.joined(separator: ",")
        #expect(refusal(try pair.deskAnswers(#"{"type":"config-offer","batch":"b2","part":1,"parts":1,"entries":[\#(entries)]}"#)).code == "too-large")
        let keys = (0...256).map { #""k.k\#($0)""# }.joined(separator: ",")
        #expect(refusal(try pair.deskAnswers(#"{"type":"config-pull","batch":"b3","keys":[\#(keys)]}"#)).code == "too-large")
        #expect(refusal(try pair.deskAnswers(#"{"type":"config-offer","batch":"b4","part":1,"parts":65,"entries":[]}"#)).code == "malformed")
        #expect(try pair.desk.value("ui.theme") == nil)
    }

    @Test("trust keys refuse the whole batch; unknown members are ignored; unknown types are unknown-type")
    func unknownAndForbidden() throws {
        var pair = try MachinePair("h-keys")
        defer { pair.remove() }
        try pair.desk.policy(.accept)
        let v = version(pair)
        let both = #"[{"key":"ui.theme","version":"\#(v)","value":"dark"},{"key":"devices.list","version":"\#(v)","value":"x"}]"#
        let r = refusal(try pair.deskAnswers(#"{"type":"config-offer","batch":"b1","part":1,"parts":1,"entries":\#(both)}"#))
        #expect(r.code == "forbidden" && r.batch == "b1")
        #expect(try pair.desk.value("ui.theme") == nil)
        let extra = #"[{"key":"ui.font","version":"\#(v)","value":"mono","colour":"red"}]"#
        let ok = try pair.deskAnswers(#"{"type":"config-offer","batch":"b2","part":1,"parts":1,"entries":\#(extra),"future":{"x":1}}"#)
        #expect(ok.first?.contains(#""status":"applied""#) == true)
        let u = refusal(try pair.deskAnswers(#"{"type":"config-bogus","batch":"b3"}"#))
        #expect(u.code == "unknown-type" && u.batch == "b3")
    }

    @Test("a config-error is never answered; a config-result for an unknown batch changes nothing")
    func noEchoes() throws {
        var pair = try MachinePair("h-echo")
        defer { pair.remove() }
        try pair.stage(.push, "s-1")
        #expect(try pair.deskAnswers(#"{"type":"config-error","code":"malformed","message":"x"}"#).isEmpty)
        #expect(try pair.deskAnswers(#"{"type":"config-error","batch":"../x","code":5}"#).isEmpty)
        #expect(try pair.deskAnswers(#"{"type":"config-result","batch":"s-1","status":"applied"}"#).isEmpty)
        #expect(pair.stagedOnDesk == ["s-1"])  // never sent, so not answered by that result
        pair.paired = false  // not even from a device that is no longer paired
        #expect(try pair.deskAnswers(#"{"type":"config-error","batch":"b1","code":"internal","message":"x"}"#).isEmpty)
        #expect(try pair.deskAnswers(#"{"type":"config-pull","batch":"b1"}"#).first?.contains(#""code":"revoked""#) == true)
    }

    @Test("a batch is applied only when its last part arrives; a part twice drops it")
    func parts() throws {
        var pair = try MachinePair("h-parts")
        defer { pair.remove() }
        try pair.desk.policy(.accept)
        let v = version(pair)
        func part(_ n: Int, _ key: String) -> String {
            #"{"type":"config-offer","batch":"b1","part":\#(n),"parts":2,"entries":[{"key":"\#(key)","version":"\#(v)","value":"x"}]}"#
        }
        #expect(try pair.deskAnswers(part(2, "a.two")).isEmpty)
        #expect(try pair.desk.value("a.two") == nil)
        #expect(try pair.deskAnswers(part(1, "a.one")).first?.contains(#""applied":["a.one","a.two"]"#) == true)
        #expect(try pair.deskAnswers(part(1, "b.one")).isEmpty)
        #expect(refusal(try pair.deskAnswers(part(1, "b.one"))).code == "malformed")
        #expect(try pair.deskAnswers(part(2, "b.two")).isEmpty)  // the batch was dropped: part 1 is missing again
        #expect(try pair.desk.value("b.two") == nil)
    }
}
