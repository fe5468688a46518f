#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeSinks
import Testing
@testable import SpeakBridgeDelivery

/// `ProgressRecorder` (a sink runner's records for one batch) and `DeliveryPipeline.SessionKey`'s stored hash.
@Suite("Progress recorder and session keys")
struct ProgressRecorderTests: ProgressLogFixture {
    let root = "/tmp/sb-recorder-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    func item(_ device: DeviceID, _ session: String, _ seq: UInt64) -> SinkItem {
        SinkItem(device: device, session: session, chunk: Chunk(seq: seq, text: "t\(seq)"))
    }

    /// Each run of one session is recorded at its last seq; the level before the batch's first record of each
    /// session (what a class-(a) rollback restores) is the log's earlier value, for the first session and for
    /// the ones after it, and nil for a session the batch did not record yet.
    @Test func recordsEachRunAndKeepsEachSessionsLevelBefore() throws {
        try prepare()
        defer { cleanup() }
        let log = try ProgressLog(path: path)
        try log.record(sink: "fifo:/f", device: device, session: "a", seq: 4)
        try log.record(sink: "fifo:/f", device: device, session: "b", seq: 9)
        let batch = [item(device, "a", 5), item(device, "a", 6), item(device, "b", 10), item(device, "c", 1),
                     item(device, "a", 7)]
        var recorder = ProgressRecorder(slot: nil)
        func record(_ k: Int) throws { try recorder.record(through: k, of: batch, sink: "fifo:/f", into: log) }
        try record(2)
        #expect(recorder.recorded == 2)
        #expect(log.progress(sink: "fifo:/f", device: device, session: "a") == 6)
        #expect(recorder.levelBefore(batch[0], in: batch) == 4)
        #expect(recorder.levelBefore(batch[2], in: batch) == nil)
        try record(2)  // nothing new: no record
        try record(5)
        #expect(log.progress(sink: "fifo:/f", device: device, session: "a") == 7)
        #expect(log.progress(sink: "fifo:/f", device: device, session: "b") == 10)
        #expect(log.progress(sink: "fifo:/f", device: device, session: "c") == 1)
        #expect(recorder.levelBefore(batch[4], in: batch) == 4, "the first record's level, not the batch's own")
        #expect(recorder.levelBefore(batch[2], in: batch) == 9)
        #expect(recorder.levelBefore(batch[3], in: batch) == 0, "no earlier record counts as 0")
        #expect(recorder.levelBefore(item(other, "a", 1), in: batch) == nil, "another device's session is another session")
        #expect(recorder.slot != nil)
    }

    @Test func sessionKeysCompareAndHashByDeviceAndSession() {
        typealias Key = DeliveryPipeline.SessionKey
        let a1 = Key(device: device, session: "s1")
        // Made separately from separate strings: equal, and equal hashes.
        let again = Key(device: device, session: String("s1".reversed().reversed()))
        #expect(a1 == again)
        #expect(a1.hashValue == again.hashValue)
        #expect(a1 != Key(device: device, session: "s2"))
        #expect(a1 != Key(device: other, session: "s1"))
        var table: [Key: Int] = [:]
        for (index, session) in ["s1", "s2", "", "é", "s1 "].enumerated() {
            table[Key(device: device, session: session)] = index
            table[Key(device: other, session: session)] = index + 10
        }
        #expect(table.count == 10)
        #expect(table[again] == 0)
        #expect(table[Key(device: other, session: "é")] == 13)
    }
}
