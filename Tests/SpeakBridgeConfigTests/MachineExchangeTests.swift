import Foundation
import SpeakBridgeConfig
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// The config machine in both roles against each other (`MachinePair`): pull, push, share modes, staged items.
@Suite("Config machine: desktop and device against each other")
struct MachineExchangeTests {
    func seedDesk(_ pair: MachinePair) throws {
        try pair.desk.set("deepgram.apiKey", .string("dg_0123456789abcdef9f3a"), secret: true)
        try pair.desk.set("transcription.locale", .string("de-CH"))
    }

    func received(_ notes: [ConfigNote]) -> [(ConfigOrigin, ConfigResult, Int)] {
        notes.compactMap { if case let .received(o, r, w) = $0 { (o, r, w) } else { nil } }
    }

    @Test("pull under share public: the secret is withheld and counted, the rest applied; the reply gets a config-result")
    func pullPublic() throws {
        var pair = try MachinePair("pull-public")
        defer { pair.remove() }
        try seedDesk(pair)
        pair.acceptOnPhone = true
        #expect(try pair.exchange([.pull(batch: "p1", keys: nil)]))
        #expect(try pair.phone.value("transcription.locale") == "\"de-CH\"")
        #expect(try pair.phone.value("deepgram.apiKey") == nil)
        let got = received(pair.phoneNotes)
        #expect(got.count == 1 && got[0].0 == .reply && got[0].1.applied == ["transcription.locale"] && got[0].2 == 1)
        #expect(pair.transcript.count == 3)
        #expect(pair.transcript[0] == #"> {"type":"config-pull","batch":"p1"}"#)
        #expect(pair.transcript[1].hasPrefix(#"< {"type":"config-offer","batch":"p1","part":1,"parts":1,"origin":"reply","entries":[{"key":"transcription.locale""#))
        #expect(pair.transcript[1].hasSuffix(#""withheld":1}"#))
        // The device answers the desktop's reply with config-result; the desktop notes it and waits for nothing.
        #expect(pair.transcript[2] == #"> {"type":"config-result","batch":"p1","status":"applied","applied":["transcription.locale"],"pending":[],"unchanged":[],"skipped":[]}"#)
        #expect(pair.deskNotes.contains { if case .delivered(let r) = $0 { r.batch == "p1" } else { false } })
        #expect(pair.afterBye.isEmpty)
    }

    @Test("pull under share all: the secret travels; policy ask on the device holds it as pending")
    func pullAll() throws {
        var pair = try MachinePair("pull-all")
        defer { pair.remove() }
        try seedDesk(pair)
        try pair.share(.all, on: pair.desk)
        #expect(try pair.exchange([.pull(batch: "p1", keys: ["deepgram.apiKey"])]))
        #expect(try pair.phone.value("deepgram.apiKey") == nil)
        let pending = try pair.phone.store.read().document.pending
        #expect(Set(pending.values.map(\.record.key)) == ["deepgram.apiKey"] && pending.values.first?.record.isSecret == true)
        #expect(!pair.transcript.joined().contains("withheld"))
    }

    @Test("pull under share none: config-error denied naming the batch; the device settles and reports it")
    func pullNone() throws {
        var pair = try MachinePair("pull-none")
        defer { pair.remove() }
        try seedDesk(pair)
        try pair.share(.none, on: pair.desk)
        #expect(try pair.exchange([.pull(batch: "p1", keys: nil)]))
        #expect(pair.transcript[1] == #"< {"type":"config-error","batch":"p1","code":"denied","message":"this desktop shares no config (share mode none)"}"#)
        #expect(pair.phoneNotes.contains { if case .peerError("p1", "denied", _) = $0 { true } else { false } })
        #expect(try pair.phone.value("transcription.locale") == nil)
    }

    @Test("keys [] asks for nothing and gets the empty answer; absent keys ask for everything shared")
    func emptyKeys() throws {
        var pair = try MachinePair("keys")
        defer { pair.remove() }
        try seedDesk(pair)
        try pair.share(.all, on: pair.desk)
        #expect(try pair.exchange([.pull(batch: "p1", keys: [])]))
        #expect(pair.transcript[0] == #"> {"type":"config-pull","batch":"p1","keys":[]}"#)
        #expect(pair.transcript[1] == #"< {"type":"config-offer","batch":"p1","part":1,"parts":1,"origin":"reply","entries":[]}"#)
        #expect(pair.transcript[2] == #"> {"type":"config-result","batch":"p1","status":"unchanged","applied":[],"pending":[],"unchanged":[],"skipped":[]}"#)
        pair.transcript = []
        #expect(try pair.exchange([.pull(batch: "p2", keys: nil)]))
        #expect(pair.transcript[1].contains("deepgram.apiKey") && pair.transcript[1].contains("transcription.locale"))
    }

    @Test("push: the desktop applies under its policy and answers config-result; the device reports it delivered")
    func push() throws {
        var pair = try MachinePair("push")
        defer { pair.remove() }
        try pair.desk.policy(.accept)
        try pair.phone.set("ui.theme", .string("dark"))
        try pair.phone.set("openrouter.token", .string("or-secret-1234"))
        try pair.phone.set("local.path", .string("/home/x"))
        try pair.phone.store.update { tx throws(ConfigError) in try tx.setLocalOnly("local.path", true) }
        #expect(try pair.exchange([.push(batch: "b1", keys: nil)]))
        #expect(try pair.desk.value("ui.theme") == "\"dark\"")
        #expect(try pair.desk.value("openrouter.token") == "or-secret-1234")  // an explicit push sends secrets
        #expect(try pair.desk.value("local.path") == nil)
        #expect(pair.phoneNotes.contains { if case .delivered(let r) = $0 { r.batch == "b1" && r.status == .applied } else { false } })
        // A key that is not set, or local-only, fails before anything is sent.
        pair.transcript = []
        #expect(try !pair.exchange([.push(batch: "b2", keys: ["ui.missing"])]))
        #expect(try !pair.exchange([.push(batch: "b3", keys: ["local.path"])]))
        #expect(try !pair.exchange([.push(batch: "b4", keys: ["../etc"])]))
        #expect(pair.transcript.isEmpty)
    }

    @Test("a staged push goes out before the answer that completes the device's request, once; then it is gone")
    func stagedPush() throws {
        var pair = try MachinePair("staged-push")
        defer { pair.remove() }
        try seedDesk(pair)
        try pair.stage(.push, "s-1", keys: ["deepgram.apiKey"])
        pair.acceptOnPhone = true
        #expect(try pair.exchange([.pull(batch: "p1", keys: nil)]))
        // Order on the wire: the staged offer, then the reply to the pull.
        #expect(pair.transcript[1].hasPrefix(#"< {"type":"config-offer","batch":"s-1","part":1,"parts":1,"origin":"staged""#))
        #expect(pair.transcript[2].hasPrefix(#"< {"type":"config-offer","batch":"p1""#))
        #expect(try pair.phone.value("deepgram.apiKey") == "dg_0123456789abcdef9f3a")
        #expect(pair.stagedOnDesk.isEmpty)
        #expect(pair.deskNotes.contains { if case .stagedDelivered(let r) = $0 { r.batch == "s-1" } else { false } })
        pair.transcript = []
        #expect(try pair.exchange([.pull(batch: "p2", keys: nil)]))
        #expect(!pair.transcript.joined().contains("s-1"))
    }

    /// Found by review: `config push` of a second key merged it into the staged item under the same ID, so the
    /// device's answer to the first offer (already in flight) unstaged both, and the second key was never sent.
    @Test("a key staged while its item is in flight goes out afterwards: the merged item takes a new ID")
    func stagedMergeWhileInFlight() throws {
        var pair = try MachinePair("staged-merge")
        defer { pair.remove() }
        try seedDesk(pair)
        var ids = ["s-2", "s-1"]
        func stage(_ key: String) throws {
            try pair.desk.store.update { tx throws(ConfigError) in
                tx.outbox.stage(device: pair.phone.id, kind: .push, keys: [key], staged: 0) { ids.removeLast() }
            }
        }
        try stage("transcription.locale")
        let first = try pair.deskAnswers(#"{"type":"config-pull","batch":"p1"}"#)
        #expect(first.first?.hasPrefix(#"{"type":"config-offer","batch":"s-1""#) == true, "\(first)")
        try stage("transcription.locale")  // the same keys again: nothing changes
        #expect(pair.stagedOnDesk == ["s-1"])
        try stage("deepgram.apiKey")
        #expect(pair.stagedOnDesk == ["s-2"])
        // The answer to the offer in flight unstages that one only.
        let result = #"{"type":"config-result","batch":"s-1","status":"applied","applied":["transcription.locale"],"pending":[],"unchanged":[],"skipped":[]}"#
        #expect(try pair.deskAnswers(result).isEmpty)
        #expect(pair.stagedOnDesk == ["s-2"])
        let next = try pair.deskAnswers(#"{"type":"config-pull","batch":"p2"}"#)
        let offer = try #require(next.first)
        #expect(offer.hasPrefix(#"{"type":"config-offer","batch":"s-2""#) && offer.contains("deepgram.apiKey")
                && offer.contains("transcription.locale"), "\(next)")
    }

    @Test("a staged pull: the device answers with its reply, the desktop applies it and answers config-result")
    func stagedPull() throws {
        var pair = try MachinePair("staged-pull")
        defer { pair.remove() }
        try pair.desk.policy(.accept)
        try pair.phone.set("ui.theme", .string("dark"))
        try pair.phone.set("openrouter.token", .string("or-secret-1234"))
        try pair.stage(.pull, "s-2")
        #expect(try pair.exchange([.pull(batch: "p1", keys: nil)]))
        #expect(pair.transcript[1] == #"< {"type":"config-pull","batch":"s-2"}"#)
        let result = pair.transcript.first { $0.hasPrefix(#"< {"type":"config-result","batch":"s-2""#) }
        #expect(result != nil, "\(pair.transcript)")
        #expect(try pair.desk.value("ui.theme") == "\"dark\"")
        #expect(try pair.desk.value("openrouter.token") == nil)  // the phone's share mode is public
        #expect(received(pair.deskNotes).first?.2 == 1)
        #expect(pair.stagedOnDesk.isEmpty)
        #expect(pair.afterBye.isEmpty)
    }

    @Test("a staged item sent and not answered is not sent again within 30 s, and is after")
    func resend() throws {
        let clock = ManualClock()
        var pair = try MachinePair("resend", clock: clock)
        defer { pair.remove() }
        try pair.stage(.pull, "s-3")
        let pull = #"{"type":"config-pull","batch":"p1"}"#
        #expect(try pair.deskAnswers(pull).first == #"{"type":"config-pull","batch":"s-3"}"#)
        clock.advance(29_000)
        #expect(try pair.deskAnswers(pull).count == 1)  // only the reply
        clock.advance(2_000)
        #expect(try pair.deskAnswers(pull).first == #"{"type":"config-pull","batch":"s-3"}"#)
    }

    @Test("sync: both hold the newest value of every key afterwards")
    func sync() throws {
        var pair = try MachinePair("sync")
        defer { pair.remove() }
        try pair.desk.policy(.accept)
        pair.acceptOnPhone = true
        try pair.desk.set("a.one", .string("desk"))
        pair.desk.clock.advance(10)
        try pair.phone.set("a.one", .string("phone"))
        try pair.phone.set("a.two", .integer(2))
        #expect(try pair.exchange([.pull(batch: "p1", keys: nil), .push(batch: "b1", keys: nil)]))
        #expect(try pair.desk.value("a.one") == "\"phone\"" && pair.phone.value("a.one") == "\"phone\"")
        #expect(try pair.desk.value("a.two") == "2")
    }

    @Test("a revoked device is refused with revoked, naming the batch; it settles and nothing changes")
    func notPaired() throws {
        var pair = try MachinePair("revoked")
        defer { pair.remove() }
        try pair.desk.policy(.accept)
        try pair.phone.set("ui.theme", .string("dark"))
        try pair.stage(.push, "s-4")
        pair.paired = false
        #expect(try pair.exchange([.push(batch: "b1", keys: nil)]))
        #expect(pair.transcript[1] == #"< {"type":"config-error","batch":"b1","code":"revoked","message":"this device is not paired with this desktop"}"#)
        #expect(try pair.desk.value("ui.theme") == nil)
        #expect(pair.deskNotes.contains(.notPaired(type: "config-offer")))
    }

    @Test("revoking a device drops what was staged for it, and only that")
    func revokeForgetsStaged() throws {
        let pair = try MachinePair("forget")
        defer { pair.remove() }
        try pair.stage(.push, "s-5")
        try pair.stage(.pull, "s-6")
        try pair.desk.store.update { tx throws(ConfigError) in
            tx.outbox.items.append(StagedOutbox.Item(id: "s-7", device: device(9), kind: .pull, keys: nil, staged: 0))
        }
        #expect(try pair.desk.store.forget(device: pair.phone.id).staged == 2)
        #expect(pair.stagedOnDesk == ["s-7"])
    }
}
