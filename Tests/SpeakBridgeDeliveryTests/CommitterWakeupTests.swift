import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore
import SpeakBridgeSupport
import Testing
@testable import SpeakBridgeDelivery

/// The committer's wake-ups at human pace (lines further apart than the pacing interval): after a pacing wait that
/// ran out with nothing pending, it waits untimed for the next line instead of sleeping out the interval after
/// every fsync — one wake-up a line, not two — and the pacing rule still holds when the pace picks up again.
/// Real pipeline, runner thread and progress log on disk; the sink is the in-memory `FakeSink`.
@Suite("Committer wake-ups", .serialized)
struct CommitterWakeupTests {
    let device = DeviceID(publicKeyDigest: SHA256.hash(Array("wakeup-device".utf8)))

    final class Acks: Sendable {
        let seen = Locked<[UInt64]>([])
        var last: UInt64 { seen.withLock { $0.last ?? 0 } }
    }

    func pipeline(_ pacing: CommitPacing, root: String) throws -> (DeliveryPipeline, ProgressLog, Acks) {
        let log = try ProgressLog(path: root + "/progress.log")
        let acks = Acks()
        let pipeline = DeliveryPipeline(
            sinks: [FakeSink("fifo", .recordBeforeWrite, itemsPerWrite: 1)], progress: log, pacing: pacing,
            onDurable: { advanced in acks.seen.withLock { for (_, seq) in advanced { $0.append(seq) } } },
            onDrained: { _ in })
        return (pipeline, log, acks)
    }

    func submit(_ pipeline: DeliveryPipeline, _ seq: UInt64) {
        _ = pipeline.submit(device: device, session: "s", chunks: [Chunk(seq: seq, text: "line \(seq)")])
    }

    /// Lines 40 ms apart with a 5 ms interval: each is fsynced at once (a quiet spell before it) and costs the
    /// committer one wake-up (the line's), not also the end of a pacing wait that found nothing. Old code: two a line.
    @Test func atHumanPaceTheCommitterWakesOnceALine() throws {
        let root = DeliveryPipelineTests.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (pipeline, log, acks) = try pipeline(CommitPacing(intervalNanoseconds: 5_000_000, flushAt: 1_000),
                                                 root: root)
        defer { pipeline.stop() }
        submit(pipeline, 1)
        try waitUntil("first ack") { acks.last == 1 }
        usleep(40_000)  // the first pacing wait runs out empty
        let before = pipeline.lock.withLock { pipeline.committerWakeups }
        let lines: UInt64 = 8
        for seq in UInt64(2)...(lines + 1) {
            submit(pipeline, seq)
            try waitUntil("line \(seq) acked") { acks.last == seq }
            usleep(40_000)
        }
        let wakeups = pipeline.lock.withLock { pipeline.committerWakeups } - before
        #expect(wakeups <= Int(lines) + 2, "\(wakeups) committer wake-ups for \(lines) lines at human pace")
        #expect(log.syncStatus.syncs == Int(lines) + 1, "every line after a quiet spell has its fsync at once")
    }

    /// Once the committer waits untimed (its last pacing wait ran out empty), the pacing rule still holds: the line
    /// after a quiet spell is fsynced at once, and lines that come within the interval of that fsync share one
    /// fsync at the interval's end (at most one more if that fsync itself outlasted the interval on a busy disk).
    @Test func thePaceRuleHoldsAfterAQuietSpell() throws {
        let root = DeliveryPipelineTests.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (pipeline, log, acks) = try pipeline(CommitPacing(intervalNanoseconds: 30_000_000, flushAt: 1_000),
                                                 root: root)
        defer { pipeline.stop() }
        submit(pipeline, 1)
        try waitUntil("first ack") { acks.last == 1 }
        usleep(100_000)  // the pacing wait ran out empty: the committer waits untimed now
        submit(pipeline, 2)
        try waitUntil("after a quiet spell: acked at once") { acks.last == 2 }
        let syncsAfterTwo = log.syncStatus.syncs
        // Right after that fsync: lines within the interval share one fsync at its end.
        for seq in UInt64(3)...6 { submit(pipeline, seq) }
        try waitUntil("the four lines acked at the interval's end") { acks.last == 6 }
        #expect(log.syncStatus.syncs <= syncsAfterTwo + 2, "lines within the interval had fsyncs of their own")
        #expect(acks.seen.withLock { $0 }.allSatisfy { $0 <= 6 })
    }
}
