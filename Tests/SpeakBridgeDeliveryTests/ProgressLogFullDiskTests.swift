#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport
import SpeakBridgeTestSupport
import Testing
@testable import SpeakBridgeDelivery

/// The progress log on a full disk (`FailingDisk.freeSpace = 0`: FUSE, Tests/fuse/failfs.c; writes past a file's end
/// fail with ENOSPC, writes inside it succeed, as on ext4). Growing the file ahead of its records
/// (`LogFile.growAhead`, in `sync`) then fails, but the records already fit in the room the file has: their sync,
/// and so the acks, must go on (before: the grow's error failed the sync, and nothing was acknowledged while the
/// disk stayed full). A record that does not fit fails, saying why.
@Suite("Progress log: a full disk", .serialized)
struct ProgressLogFullDiskTests: ProgressLogFixture {
    let root = "/tmp/sb-progress-full-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    @Test("the grow ahead fails, the sync of records that fit succeeds; a record that does not fit fails, saying why")
    func fullDisk() throws {
        let disk = try FailingDisk(over: root)
        defer {
            disk.unmount()
            cleanup()
        }
        let log = try ProgressLog(path: path)
        let file = log.lock.withLock { log.file }
        var seq: UInt64 = 0
        func record() throws(StoreError) {
            seq += 1
            try log.record(sink: "stdout", device: device, session: "s", seq: seq)
        }
        // Until less than half a minimum extent is left: the next sync grows the file ahead.
        while file.allocated - file.end >= LogFile.progressExtents.minimum / 2 { try record() }
        try log.sync()  // grown ahead while the disk has room
        let allocated = file.allocated
        while file.allocated - file.end >= LogFile.progressExtents.minimum / 2 { try record() }
        disk.freeSpace = 0
        try record()  // inside the file: written in place
        try log.sync()  // before: "cannot write …: No space left on device", from the grow ahead
        #expect(disk.spaceFailures >= 1, "the grow ahead was tried and failed")
        #expect(file.allocated == allocated)
        #expect(log.syncStatus.durableLines == log.lock.withLock { log.appendedLines }, "every record is durable")
        // Records go on into the room left until one does not fit: that one fails, and changes nothing.
        var failure: StoreError?
        while failure == nil {
            do throws(StoreError) { try record() } catch { failure = error }
        }
        #expect(failure?.message == "cannot grow \(path): No space left on device")
        #expect(failure?.hint == "free some disk space; nothing was lost, the operation can be retried")
        #expect(log.progress(sink: "stdout", device: device, session: "s") == seq - 1)
        try log.sync()  // the records that fit
        #expect(log.syncStatus.durableLines == log.lock.withLock { log.appendedLines })
        #expect(file.allocated == allocated)
        disk.freeSpace = nil
        let (values, _) = try ProgressLog.load(path)
        #expect(values[device]?["s"]?["stdout"] == seq - 1)
        try record()  // room again: the file grows
        try log.sync()
        #expect(file.allocated > allocated)
        #expect(log.progress(sink: "stdout", device: device, session: "s") == seq)
    }

    /// The same through the real pipeline (runner thread, group commit): what the client sees are the acks.
    @Test("the delivery pipeline on a full disk acknowledges every chunk whose record fits")
    func pipelineAcksOnFullDisk() throws {
        let disk = try FailingDisk(over: root)
        defer {
            disk.unmount()
            cleanup()
        }
        let log = try ProgressLog(path: path)
        let file = log.lock.withLock { log.file }
        var seq: UInt64 = 0
        while file.allocated - file.end >= LogFile.progressExtents.minimum / 2 {
            seq += 1
            try log.record(sink: "earlier", device: other, session: "x", seq: seq)
        }
        disk.freeSpace = 0
        let acked = Locked<UInt64>(0)
        let pipeline = DeliveryPipeline(sinks: [FakeSink("fake", .recordBeforeWrite)], progress: log,
                                        onDurable: { advanced in
                                            acked.withLock { for (_, seq) in advanced { $0 = max($0, seq) } }
                                        }, onDrained: { _ in })
        defer { pipeline.stop() }
        _ = pipeline.submit(device: device, session: "s", chunks: (1...20).map { Chunk(seq: $0, text: "chunk \($0)") })
        // Before: every commit's sync failed on the grow ahead ("cannot make delivery progress durable"), no ack.
        try waitUntil("every chunk acknowledged on the full disk", timeout: 10) { acked.withLock { $0 } == 20 }
        #expect(disk.spaceFailures >= 1, "the grow ahead was tried and failed")
    }
}
