import Foundation
import SpeakBridgeConfig
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// Found by review: one cap of 2,048 keys was shared by the records and every device's pending changes, so one
/// device (two 1,024-key offers of 3 KB values: a 6.4 MB settings.json) made every other device's offer
/// `too-large`. Now pending changes count against a quota of their device (256 changes, 256 KiB; the literals
/// here are those of PeerChanges.swift and PROTOCOL.md's limits table) and the 2,048 keys count records only.
@Suite("Pending changes: a quota per device")
struct PendingQuotaTests {
    let desk = device(1)
    let phone = device(2)
    let thief = device(3)

    func offers(_ prefix: String, _ range: Range<Int>, value: String = "x", ms: UInt64, by d: DeviceID) -> [ConfigUpdate] {
        range.map { update("\(prefix).k\($0)", value, ms: ms, by: d) }
    }

    @Test("a device's 257th pending change is refused (too-large), whole batch; its first 256 stay")
    func countQuota() throws {
        let s = try TestStore("quota-count", device: desk)
        defer { s.remove() }
        #expect(try s.apply(offers("a", 0..<256, ms: s.clock.ms, by: thief), from: thief).status == .pending)
        let before = s.fileBytes
        #expect(errorCode { _ = try s.apply(offers("b", 0..<1, ms: s.clock.ms, by: thief), from: thief) } == .tooLarge)
        let unchanged = s.fileBytes == before
        #expect(unchanged, "nothing of the refused batch is stored")
        #expect(errorCode { _ = try s.apply(offers("c", 0..<1_000, ms: s.clock.ms, by: thief), from: thief) } == .tooLarge)
        #expect(try s.store.read().document.pending.count == 256)
        // Its own pending changes may still be replaced by newer ones (the count does not grow).
        #expect(try s.apply(offers("a", 0..<256, value: "y", ms: s.clock.ms + 1, by: thief), from: thief).status == .pending)
    }

    @Test("a device's pending bytes are bounded: 100 values of 3 KB are refused; 80 fit")
    func byteQuota() throws {
        let s = try TestStore("quota-bytes", device: desk)
        defer { s.remove() }
        let big = String(repeating: "v", count: 3_000)
        #expect(errorCode { _ = try s.apply(offers("a", 0..<100, value: big, ms: s.clock.ms, by: thief), from: thief) } == .tooLarge)
        #expect(try s.store.read().document.pending.isEmpty)
        #expect(try s.apply(offers("a", 0..<80, value: big, ms: s.clock.ms, by: thief), from: thief).status == .pending)
        #expect(errorCode { _ = try s.apply(offers("b", 0..<8, value: big, ms: s.clock.ms, by: thief), from: thief) } == .tooLarge)
    }

    @Test("a device that filled its quota leaves another device's offer untouched: still held for consent")
    func otherDeviceStillHeld() throws {
        let s = try TestStore("quota-other", device: desk)
        defer { s.remove() }
        let filler = String(repeating: "f", count: 3_000)
        var refused = 0
        for batch in 0..<8 {  // what the review did, and more: every batch as large as a batch may be
            let first = batch * 1_024
            if errorCode({ _ = try s.apply(offers("spam", first..<(first + 1_024), value: filler, ms: s.clock.ms, by: thief), from: thief) }) == .tooLarge {
                refused += 1
            }
        }
        #expect(refused == 8)
        _ = try s.apply(offers("spam", 0..<80, value: filler, ms: s.clock.ms, by: thief), from: thief)
        #expect(s.fileBytes.count < 300_000, "settings.json stays small: \(s.fileBytes.count) bytes")
        let r = try s.apply([update("transcription.locale", "de-CH", ms: s.clock.ms, by: phone)], from: phone)
        #expect(r.status == .pending && r.pending == ["transcription.locale"])
    }

    @Test("the 2,048-key cap counts records only: 2,000 local keys and 200 pending changes fit")
    func capCountsRecordsOnly() throws {
        let s = try TestStore("quota-records", device: desk)
        defer { s.remove() }
        try s.store.update { tx throws(ConfigError) in
            for i in 0..<2_000 { try tx.set("local.k\(i)", .integer(Int64(i))) }
        }
        #expect(try s.apply(offers("remote", 0..<200, ms: s.clock.ms, by: phone), from: phone).status == .pending)
        try s.policy(.accept, for: thief)
        #expect(errorCode { _ = try s.apply(offers("more", 0..<49, ms: s.clock.ms, by: thief), from: thief) } == .tooLarge)
        #expect(try s.apply(offers("more", 0..<48, ms: s.clock.ms, by: thief), from: thief).status == .applied)
    }

    @Test("a pending change's bytes are stored with it; one stored without them (older version) is measured again")
    func bytesPersisted() throws {
        let s = try TestStore("quota-persist", device: desk)
        defer { s.remove() }
        let secret = ConfigUpdate(key: "a.apiKey", version: HLCTimestamp(ms: s.clock.ms, counter: 0, device: thief),
                                  body: .secret("sk-123456"))
        _ = try s.apply([secret, update("a.name", "abc", ms: s.clock.ms, by: thief)], from: thief)
        func bytes() throws -> [String: Int] {
            Dictionary(uniqueKeysWithValues: try s.store.read().document.pending.values.map { ($0.record.key, $0.bytes) })
        }
        #expect(try bytes() == ["a.apiKey": 8 + 9, "a.name": 6 + 3], "the secret's real length, read back from the file")
        let text = String(decoding: s.fileBytes, as: UTF8.self)
            .replacingOccurrences(of: #""bytes":\d+,"#, with: "", options: .regularExpression)
        try FileIO.atomicWrite(s.home.settingsFile, Array(text.utf8))
        #expect(try bytes() == ["a.apiKey": 8 + 4_096, "a.name": 6 + 3], "without `bytes`, a secret counts as the largest value")
    }
}
