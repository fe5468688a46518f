import SpeakBridgeConfig
import SpeakBridgeProtocol
import Testing

@Suite("Consent policy and local-only keys")
struct PolicyTests {
    let desk = device(1)
    let phone = device(2)

    @Test("ask (the default) holds newer changes as pending; accept applies them; reject drops them")
    func ask() throws {
        let s = try TestStore("ask", device: phone)
        defer { s.remove() }
        try s.set("b", .string("mine"))
        let r = try s.apply([update("a", "x", ms: s.clock.ms, by: desk), update("b", "theirs", ms: s.clock.ms + 1, by: desk)], from: desk)
        #expect(r.status == .pending && r.pending == ["a", "b"])
        #expect(try s.value("a") == nil)
        #expect(try s.value("b") == "\"mine\"")
        let done = try s.store.update { tx throws(ConfigError) in try tx.acceptPending(["a"], paired: { _ in true }) }
        #expect(done.applied == ["a"] && done.superseded.isEmpty)
        #expect(try s.value("a") == "\"x\"")
        #expect(try s.store.update { tx throws(ConfigError) in try tx.rejectPending(nil) } == ["b"])
        #expect(try s.value("b") == "\"mine\"")
        #expect(try s.store.read().document.pending.isEmpty)
    }

    @Test("a pending change that a newer local write superseded is dropped on accept")
    func superseded() throws {
        let s = try TestStore("super", device: phone)
        defer { s.remove() }
        _ = try s.apply([update("a", "x", ms: s.clock.ms - 100, by: desk)], from: desk)
        try s.set("a", .string("local"))
        let done = try s.store.update { tx throws(ConfigError) in try tx.acceptPending(nil, paired: { _ in true }) }
        #expect(done.applied.isEmpty && done.superseded == ["a"])
        #expect(try s.value("a") == "\"local\"")
    }

    @Test("deny stores nothing and overrides --accept; a per-device policy overrides the default")
    func denyAndPerDevice() throws {
        let s = try TestStore("deny", device: phone)
        defer { s.remove() }
        try s.policy(.deny)
        let r = try s.apply([update("a", "x", ms: s.clock.ms, by: desk)], from: desk, acceptOverride: true)
        #expect(r.status == .denied)
        #expect(try s.store.read().document.records.isEmpty && s.store.read().document.pending.isEmpty)
        try s.policy(.accept, for: desk)
        #expect(try s.apply([update("a", "x", ms: s.clock.ms, by: desk)], from: desk).status == .applied)
        #expect(try s.apply([update("b", "y", ms: s.clock.ms, by: device(9))], from: device(9)).status == .denied)
    }

    @Test("--accept (acceptOverride) applies under ask")
    func acceptOverride() throws {
        let s = try TestStore("override", device: phone)
        defer { s.remove() }
        #expect(try s.apply([update("a", "x", ms: s.clock.ms, by: desk)], from: desk, acceptOverride: true).applied == ["a"])
    }

    @Test("local-only keys never leave and ignore peers' values")
    func localOnly() throws {
        let s = try TestStore("local", device: phone)
        defer { s.remove() }
        try s.policy(.accept)
        try s.set("audio.device", .string("hw:1"))
        try s.set("ui.theme", .string("dark"))
        try s.store.update { tx throws(ConfigError) in try tx.setLocalOnly("audio.device", true) }
        #expect(try s.offer().map(\.key) == ["ui.theme"])
        #expect(try s.offer(["audio.device"]).isEmpty)
        let r = try s.apply([update("audio.device", "hw:9", ms: s.clock.ms + 5, by: desk)], from: desk)
        #expect(r.skipped == ["audio.device"] && r.status == .unchanged)
        #expect(try s.value("audio.device") == "\"hw:1\"")
    }

    @Test("secrets are left out of offers when not asked for (share mode public)")
    func publicShare() throws {
        let s = try TestStore("public", device: desk)
        defer { s.remove() }
        try s.set("rev.apiKey", .string("rev_abcdefghijklmnop1234"))
        try s.set("ui.theme", .string("dark"))
        #expect(try s.offer(secrets: false).map(\.key) == ["ui.theme"])
        let all = try s.offer()
        #expect(all.first { $0.key == "rev.apiKey" }?.body == .secret("rev_abcdefghijklmnop1234"))
    }
}
