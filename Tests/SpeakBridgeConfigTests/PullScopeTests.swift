import Foundation
import SpeakBridgeConfig
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// A pull that names keys gets only those keys: the offer answering it (found by its batch ID) may bring nothing
/// else, and `--accept` applies only what the user asked for. Found by review: `config pull ui.theme --accept`
/// applied every key the desktop's answer (or a staged push in the same exchange) brought, so a hostile or
/// compromised desktop could plant an API key or any other setting.
@Suite("Config machine: a pull gets only what it asked for")
struct PullScopeTests {
    static let secret = "dg_0123456789abcdef9f3a"

    func offer(_ batch: String, origin: String = "reply", _ entries: [(String, String)], version: String) -> String {
        let list = entries.map { #"{"key":"\#($0.0)","version":"\#(version)","value":"\#($0.1)"}"# }
        return #"{"type":"config-offer","batch":"\#(batch)","part":1,"parts":1,"origin":"\#(origin)","entries":[\#(list.joined(separator: ","))]}"#
    }

    func unrequested(_ notes: [ConfigNote]) -> [String] {
        notes.flatMap { note -> [String] in
            if case let .unrequested(_, keys) = note { return keys }
            return []
        }
    }

    @Test("a desktop answering `pull ui.theme --accept` with other keys too: only ui.theme applies, the others are refused and reported")
    func hostileReplyWithExtraKeys() throws {
        var pair = try MachinePair("scope-reply")
        defer { pair.remove() }
        pair.acceptOnPhone = true
        #expect(pair.phoneStarts([.pull(batch: "p1", keys: ["ui.theme"])]) == [#"{"type":"config-pull","batch":"p1","keys":["ui.theme"]}"#])
        let v = HLCTimestamp(ms: pair.phone.clock.ms, counter: 0, device: pair.desk.id).description
        let answers = try pair.phoneAnswers(offer("p1", [("ui.theme", "dark"), ("deepgram.apiKey", "dg_attacker_key_0000"),
                                                          ("transcription.endpoint", "https://evil.example")], version: v))
        #expect(try pair.phone.value("ui.theme") == "\"dark\"")
        #expect(try pair.phone.value("deepgram.apiKey") == nil)
        #expect(try pair.phone.value("transcription.endpoint") == nil)
        let doc = try pair.phone.store.read().document
        #expect(doc.pending.isEmpty, "nothing of the extra keys is held either")
        #expect(unrequested(pair.phoneNotes) == ["deepgram.apiKey", "transcription.endpoint"])
        // The desktop is told they were not taken, and the device's request is answered.
        #expect(answers == [#"{"type":"config-result","batch":"p1","status":"applied","applied":["ui.theme"],"pending":[],"unchanged":[],"skipped":["deepgram.apiKey","transcription.endpoint"]}"#])
        #expect(pair.phoneMachine.isSettled)

        // A second answer to the same pull is held to it too (it no longer waits, but it still named ui.theme).
        let again = try pair.phoneAnswers(offer("p1", [("deepgram.apiKey", "dg_attacker_key_0000")], version: v))
        #expect(again.first?.contains(#""skipped":["deepgram.apiKey"]"#) == true)
        #expect(try pair.phone.value("deepgram.apiKey") == nil)
    }

    @Test("an extra trust key in an answer still refuses the whole batch (forbidden), as in any batch")
    func extraTrustKeyRefusesAll() throws {
        var pair = try MachinePair("scope-forbidden")
        defer { pair.remove() }
        pair.acceptOnPhone = true
        _ = pair.phoneStarts([.pull(batch: "p1", keys: ["ui.theme"])])
        let v = HLCTimestamp(ms: pair.phone.clock.ms, counter: 0, device: pair.desk.id).description
        let answers = try pair.phoneAnswers(offer("p1", [("ui.theme", "dark"), ("policy.default", "accept")], version: v))
        #expect(answers.count == 1 && answers[0].contains(#""code":"forbidden""#))
        #expect(try pair.phone.value("ui.theme") == nil)
        #expect(unrequested(pair.phoneNotes).isEmpty)
    }

    @Test("`pull ui.theme --accept` while the desktop has a push of another key staged: that key waits for consent")
    func stagedPushOutsideTheAskedKeysFollowsThePolicy() throws {
        var pair = try MachinePair("scope-staged")
        defer { pair.remove() }
        try pair.desk.set("deepgram.apiKey", .string(Self.secret), secret: true)
        try pair.desk.set("ui.theme", .string("dark"))
        try pair.stage(.push, "s-1", keys: ["deepgram.apiKey"])
        pair.acceptOnPhone = true
        #expect(try pair.exchange([.pull(batch: "p1", keys: ["ui.theme"])]))
        #expect(try pair.phone.value("ui.theme") == "\"dark\"")
        #expect(try pair.phone.value("deepgram.apiKey") == nil, "--accept covers only the key the pull named")
        #expect(Set(try pair.phone.store.read().document.pending.values.map(\.record.key)) == ["deepgram.apiKey"])
        #expect(pair.stagedOnDesk.isEmpty, "the staged push was answered (pending), so it is delivered")

        // Without keys, --accept covers everything the exchange brings (README: "fetch what is shared or staged,
        // apply it now").
        var all = try MachinePair("scope-staged-all")
        defer { all.remove() }
        try all.desk.set("deepgram.apiKey", .string(Self.secret), secret: true)
        try all.stage(.push, "s-1", keys: ["deepgram.apiKey"])
        all.acceptOnPhone = true
        #expect(try all.exchange([.pull(batch: "p1", keys: nil)]))
        #expect(try all.phone.value("deepgram.apiKey") == Self.secret)
    }

    @Test("`pull --accept` without keys: the device's own rules still hold (local-only skipped, deny stores nothing)")
    func acceptWithoutKeysKeepsLocalRules() throws {
        var pair = try MachinePair("scope-all")
        defer { pair.remove() }
        try pair.desk.set("ui.theme", .string("dark"))
        try pair.desk.set("audio.device", .string("hw:9"))
        try pair.phone.store.update { tx throws(ConfigError) in try tx.setLocalOnly("audio.device", true) }
        pair.acceptOnPhone = true
        #expect(try pair.exchange([.pull(batch: "p1", keys: nil)]))
        #expect(try pair.phone.value("ui.theme") == "\"dark\"")
        #expect(try pair.phone.value("audio.device") == nil)

        var denied = try MachinePair("scope-deny")
        defer { denied.remove() }
        try denied.desk.set("ui.theme", .string("dark"))
        try denied.phone.policy(.deny, for: denied.desk.id)
        denied.acceptOnPhone = true
        #expect(try denied.exchange([.pull(batch: "p1", keys: nil)]))
        #expect(try denied.phone.value("ui.theme") == nil)
        #expect(try denied.phone.store.read().document.pending.isEmpty)
    }

    @Test("a device answering the desktop's staged `pull --from PHONE ui.theme` with other keys: only ui.theme applies")
    func deviceAnswersStagedPullWithExtraKeys() throws {
        var pair = try MachinePair("scope-desk")
        defer { pair.remove() }
        try pair.desk.policy(.accept)
        try pair.stage(.pull, "s-1", keys: ["ui.theme"])
        // The device's pull makes the desktop send its staged pull first.
        let sent = try pair.deskAnswers(#"{"type":"config-pull","batch":"p1","keys":[]}"#)
        #expect(sent.first == #"{"type":"config-pull","batch":"s-1","keys":["ui.theme"]}"#)
        let v = HLCTimestamp(ms: pair.desk.clock.ms, counter: 0, device: pair.phone.id).description
        let answers = try pair.deskAnswers(offer("s-1", [("ui.theme", "dark"), ("openrouter.apiKey", "sk-or-planted")], version: v))
        #expect(answers == [#"{"type":"config-result","batch":"s-1","status":"applied","applied":["ui.theme"],"pending":[],"unchanged":[],"skipped":["openrouter.apiKey"]}"#])
        #expect(try pair.desk.value("ui.theme") == "\"dark\"")
        #expect(try pair.desk.value("openrouter.apiKey") == nil)
        #expect(unrequested(pair.deskNotes) == ["openrouter.apiKey"])
        #expect(pair.stagedOnDesk.isEmpty, "the answer still answers the staged pull")
    }
}
