#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
import SpeakBridgeStore
@testable import SpeakBridgeDelivery

/// The progress log's cached record lines (`ProgressSlot`): byte for byte the JSON lines the log always wrote,
/// and a cached slot never records under a stale key or into a retired or forgotten session.
@Suite("Progress slots")
struct ProgressSlotTests: ProgressLogFixture {
    let root = "/tmp/sb-slot-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    @Test func aCachedLineIsTheJSONLineByteForByte() {
        let labels = ["stdout", "fifo:/tmp/a \"b\"\\c", "jsonl:/x/y.jsonl", "type:é✓", "tab\there", "nul\u{0}ctl\u{1F}"]
        let sessions = ["s", "2026-11-23T00:00:00Z-ab12", "x\u{7F}y", "\u{2028}"]
        let seqs: [UInt64] = [0, 1, 9, 10, 99, 100, 12_345, 1 << 32, UInt64(Int64.max), UInt64(Int64.max) + 1, .max]
        for label in labels {
            for session in sessions {
                let slot = ProgressSlot(ProgressLog.Key(sink: label, device: device, session: session))
                for seq in seqs {
                    var line: [UInt8] = []
                    slot.appendLine(seq, to: &line)
                    #expect(line == ProgressLog.line(label, device, session, seq), "\(label) \(session) \(seq)")
                }
            }
        }
    }

    @Test func recordsThroughASlotReplayAsTheGenericRecordsDo() throws {
        try prepare()
        defer { cleanup() }
        do {
            let log = try ProgressLog(path: path)
            var (slot, previous) = try log.record(.init(sink: "fifo:/f", device: device, session: "s\"1"), seq: 3,
                                                  cached: nil)
            #expect(previous == nil)
            for seq in 4...40 as ClosedRange<UInt64> {
                let result = try log.record(.init(sink: "fifo:/f", device: device, session: "s\"1"), seq: seq,
                                            cached: slot)
                #expect(result.slot === slot, "the same session's slot is reused")
                #expect(result.previous == seq - 1)
                slot = result.slot
            }
            // A cached slot of another key is not used for this one.
            let second = try log.record(.init(sink: "fifo:/f", device: other, session: "s\"1"), seq: 7, cached: slot)
            #expect(second.slot !== slot && second.previous == nil)
            #expect(log.progress(sink: "fifo:/f", device: device, session: "s\"1") == 40)
            #expect(log.progress(sink: "fifo:/f", device: other, session: "s\"1") == 7)
        }
        let log = try ProgressLog(path: path)
        #expect(log.entries() == [.init(sink: "fifo:/f", device: device, session: "s\"1"): 40,
                                  .init(sink: "fifo:/f", device: other, session: "s\"1"): 7])
    }

    @Test func aSlotOfARetiredOrForgottenSessionRecordsItLiveAgain() throws {
        try prepare()
        defer { cleanup() }
        let key = ProgressLog.Key(sink: "stdout", device: device, session: "s")
        do {
            let log = try ProgressLog(path: path)
            let (slot, _) = try log.record(key, seq: 5, cached: nil)
            try log.retire(device: device, session: "s", delivered: 5)
            #expect(log.progress(sink: "stdout", device: device, session: "s") == nil)
            let again = try log.record(key, seq: 6, cached: slot)
            #expect(again.previous == nil, "a retired session had no live progress")
            #expect(log.retiredEntries().isEmpty, "recording makes the session live again")
            #expect(log.progress(sink: "stdout", device: device, session: "s") == 6)

            try log.forget(device: device)
            #expect(log.entries().isEmpty)
            // A generic record after the forget, then the stale slot: both land on the one live entry.
            try log.record(sink: "stdout", device: device, session: "s", seq: 1)
            let last = try log.record(key, seq: 2, cached: again.slot)
            #expect(last.previous == 1)
            #expect(log.entries() == [key: 2])
        }
        let log = try ProgressLog(path: path)
        #expect(log.entries() == [key: 2])
        #expect(log.retiredEntries().isEmpty)
    }

    @Test func compactionKeepsWhatSlotsRecorded() throws {
        try prepare()
        defer { cleanup() }
        let key = ProgressLog.Key(sink: "stdout", device: device, session: "s")
        do {
            let log = try ProgressLog(path: path)
            log.lock.withLock { log.compactAfterBytes = 1 }
            var slot: ProgressSlot?
            for seq in 1...50 as ClosedRange<UInt64> {
                slot = try log.record(key, seq: seq, cached: slot).slot
                if seq % 10 == 0 { try log.sync() }  // compacts: the snapshot is taken from the slots
            }
            try log.sync()
        }
        let log = try ProgressLog(path: path)
        #expect(log.entries() == [key: 50])
        #expect(String(decoding: try #require(try LogFile.readRecords(path)), as: UTF8.self)
                == "[\"stdout\",\"\(device.description)\",\"s\",50]\n")
    }
}
