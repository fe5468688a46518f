import SpeakBridgeConfig
import SpeakBridgeProtocol
import Testing

/// Found by review: a pending change was keyed by its key alone, so a hostile device's newer version of a key
/// replaced the change another device had offered for it.
@Suite("Pending changes are kept per (key, device)")
struct PendingPerDeviceTests {
    let desk = device(1)
    let phone = device(2)
    let thief = device(3)

    @Test("a device's newer change of a key waits beside another device's; it cannot replace it")
    func noReplacement() throws {
        let s = try TestStore("pending-pair", device: desk)
        defer { s.remove() }
        _ = try s.apply([update("transcription.locale", "de-CH", ms: s.clock.ms, by: phone)], from: phone)
        let r = try s.apply([update("transcription.locale", "xx-EVIL", ms: s.clock.ms + 1, by: thief)], from: thief)
        #expect(r.status == .pending)
        let pending = try s.store.read().document.pending.values
        #expect(pending.count == 2)
        #expect(Set(pending.map(\.from)) == [phone, thief])
        #expect(pending.contains { $0.from == phone && $0.record.body == .value(.string("de-CH")) })
        // The settings file keeps both.
        #expect(String(decoding: s.fileBytes, as: UTF8.self).contains("de-CH"))
    }

    @Test("a device replaces its own pending change with a newer one, never with an older one")
    func ownReplacement() throws {
        let s = try TestStore("pending-own", device: desk)
        defer { s.remove() }
        _ = try s.apply([update("ui.theme", "dark", ms: s.clock.ms, by: phone)], from: phone)
        _ = try s.apply([update("ui.theme", "light", ms: s.clock.ms + 5, by: phone)], from: phone)
        _ = try s.apply([update("ui.theme", "old", ms: s.clock.ms - 5, by: phone)], from: phone)
        let pending = try s.store.read().document.pending.values
        #expect(pending.count == 1 && pending.first?.record.body == .value(.string("light")))
    }

    @Test("accept applies the newest of a key's pending changes and drops the others; reject drops all of them")
    func acceptNewest() throws {
        let s = try TestStore("pending-accept", device: desk)
        defer { s.remove() }
        _ = try s.apply([update("ui.theme", "dark", ms: s.clock.ms, by: phone)], from: phone)
        _ = try s.apply([update("ui.theme", "light", ms: s.clock.ms + 1, by: thief)], from: thief)
        _ = try s.apply([update("ui.font", "mono", ms: s.clock.ms, by: phone)], from: phone)
        _ = try s.apply([update("ui.font", "serif", ms: s.clock.ms + 2, by: thief)], from: thief)
        let done = try s.store.update { tx throws(ConfigError) in try tx.acceptPending(["ui.theme"], paired: { _ in true }) }
        #expect(done.applied == ["ui.theme"] && done.superseded.isEmpty && done.unpaired.isEmpty)
        #expect(try s.value("ui.theme") == "\"light\"")
        let left = try s.store.read().document.pending.values
        #expect(left.count == 2 && left.allSatisfy { $0.record.key == "ui.font" })
        #expect(try s.store.update { tx throws(ConfigError) in try tx.rejectPending(["ui.font"]) } == ["ui.font"])
        #expect(try s.store.read().document.pending.isEmpty)
    }

    @Test("under accept, an applied value drops every device's older pending change of that key")
    func appliedSupersedes() throws {
        let s = try TestStore("pending-applied", device: desk)
        defer { s.remove() }
        _ = try s.apply([update("ui.theme", "dark", ms: s.clock.ms, by: phone)], from: phone)
        _ = try s.apply([update("ui.theme", "future", ms: s.clock.ms + 10, by: thief)], from: thief)
        try s.policy(.accept, for: phone)
        #expect(try s.apply([update("ui.theme", "light", ms: s.clock.ms + 5, by: phone)], from: phone).status == .applied)
        let left = try s.store.read().document.pending.values
        #expect(left.count == 1 && left.first?.from == thief, "the newer change of another device still waits")
    }
}
