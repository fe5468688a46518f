import SpeakBridgeConfig
import SpeakBridgeProtocol
import Testing

@Suite("Merge: per-key last writer wins, tombstones")
struct MergeTests {
    let desk = device(1)
    let phone = device(2)

    @Test("a newer value wins, an older or equal one changes nothing")
    func lastWriterWins() throws {
        let s = try TestStore("lww", device: desk)
        defer { s.remove() }
        try s.policy(.accept)
        let r1 = try s.apply([update("a", "one", ms: s.clock.ms - 10, by: phone)], from: phone)
        #expect(r1.applied == ["a"])
        let r2 = try s.apply([update("a", "older", ms: s.clock.ms - 20, by: phone)], from: phone)
        #expect(r2.status == .unchanged && r2.unchanged == ["a"])
        let r3 = try s.apply([update("a", "one", ms: s.clock.ms - 10, by: phone)], from: phone)
        #expect(r3.status == .unchanged)
        #expect(try s.value("a") == "\"one\"")
        // A local write after seeing the remote one is newer than it.
        try s.set("a", .string("mine"))
        let r4 = try s.apply([update("a", "late", ms: s.clock.ms - 10, by: phone)], from: phone)
        #expect(r4.status == .unchanged)
        #expect(try s.value("a") == "\"mine\"")
    }

    @Test("a tombstone wins over an older value; a newer value wins over a tombstone")
    func tombstones() throws {
        let s = try TestStore("tomb", device: desk)
        defer { s.remove() }
        try s.policy(.accept)
        try s.set("k", .string("v"))
        let old = try #require(try s.store.read().document.records["k"]).version
        let tomb = ConfigUpdate(key: "k", version: HLCTimestamp(ms: old.ms + 1, counter: 0, device: phone), body: .deleted)
        #expect(try s.apply([tomb], from: phone).applied == ["k"])
        #expect(try s.value("k") == nil)
        #expect(try s.store.read().document.records["k"]?.isDeleted == true)
        // The older value arrives again (from a third device): the tombstone stays.
        let stale = ConfigUpdate(key: "k", version: old, body: .value(.string("v")))
        #expect(try s.apply([stale], from: device(3)).status == .unchanged)
        #expect(try s.value("k") == nil)
        // The tombstone is offered like a value, so the deletion syncs.
        #expect(try s.offer().contains(tomb))
        let newer = ConfigUpdate(key: "k", version: HLCTimestamp(ms: old.ms + 2, counter: 0, device: phone), body: .value(.bool(true)))
        #expect(try s.apply([newer], from: phone).applied == ["k"])
        #expect(try s.value("k") == "true")
    }

    @Test("two stores that exchange in any order end with the same winners")
    func convergence() throws {
        let clock = ManualClock()
        let a = try TestStore("conv-a", device: desk, clock: clock)
        let b = try TestStore("conv-b", device: phone, clock: clock)
        defer { a.remove(); b.remove() }
        try a.policy(.accept)
        try b.policy(.accept)
        try a.set("model", .string("nova-2"))
        try b.set("temp", .double(0.2))
        clock.advance(5)
        try b.set("model", .string("whisper"))
        try a.set("temp", .double(0.7))
        // Same millisecond on both: the device ID decides.
        try a.set("tie", .string("from-a"))
        try b.set("tie", .string("from-b"))
        _ = try b.apply(try a.offer(), from: desk)
        _ = try a.apply(try b.offer(), from: phone)
        for key in ["model", "temp", "tie"] { #expect(try a.value(key) == b.value(key), "\(key)") }
        #expect(try a.value("model") == "\"whisper\"")
        #expect(try a.value("temp") == "0.7")
        #expect(try a.value("tie") == "\"from-b\"")  // device 0x02… > 0x01…
        // Applying the same offers again changes nothing.
        #expect(try a.apply(try b.offer(), from: phone).status == .unchanged)
    }

    @Test("a key that is secret here stays secret when a peer sends a plain string for it")
    func stickySecret() throws {
        let s = try TestStore("sticky", device: desk)
        defer { s.remove() }
        try s.policy(.accept)
        try s.set("deepgram.apiKey", .string("dg_0123456789abcdef0000"))
        #expect(try s.store.read().document.records["deepgram.apiKey"]?.isSecret == true)  // named like a credential
        _ = try s.apply([update("deepgram.apiKey", "dg_ffffffffffffffff1111", ms: s.clock.ms, by: phone)], from: phone)
        let tx = try s.store.read()
        let record = try #require(tx.document.records["deepgram.apiKey"])
        #expect(record.isSecret)
        #expect(try tx.shown(record, reveal: false) == "dg_…1111")
    }
}
