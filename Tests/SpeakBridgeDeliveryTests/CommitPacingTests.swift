import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore
import SpeakBridgeSupport
import Testing
@testable import SpeakBridgeDelivery

/// The group commit's pacing (`CommitPacing`) with the real pipeline, runner thread and progress log on disk (the
/// sink is the in-memory `FakeSink`): the first advance after a quiet spell is fsynced at once, later ones share
/// an fsync until the interval ends or enough chunks wait, and an ack never comes before the fsync that covers it.
@Suite("Commit pacing", .serialized)
struct CommitPacingTests {
    typealias SessionKey = DeliveryPipeline.SessionKey
    let device = DeviceID(publicKeyDigest: SHA256.hash(Array("pacing-device".utf8)))
    var key: SessionKey { SessionKey(device: device, session: "s") }

    /// Every ack, with what the log had made durable when it was sent.
    final class Acks: Sendable {
        struct Seen: Sendable { var seq: UInt64; var durableLines: Int; var syncs: Int }
        let seen = Locked<[Seen]>([])
        var last: UInt64 { seen.withLock { $0.last?.seq ?? 0 } }
    }

    /// One class-(a) sink that writes one item per write: its n-th chunk is the log's n-th line.
    func pipeline(_ pacing: CommitPacing, root: String) throws -> (DeliveryPipeline, ProgressLog, Acks) {
        let log = try ProgressLog(path: root + "/progress.log")
        let acks = Acks()
        let pipeline = DeliveryPipeline(
            sinks: [FakeSink("fifo", .recordBeforeWrite, itemsPerWrite: 1)], progress: log, pacing: pacing,
            onDurable: { advanced in
                let (syncs, lines) = log.syncStatus
                acks.seen.withLock {
                    for (_, seq) in advanced { $0.append(.init(seq: seq, durableLines: lines, syncs: syncs)) }
                }
            }, onDrained: { _ in })
        return (pipeline, log, acks)
    }

    func submit(_ pipeline: DeliveryPipeline, _ seq: UInt64) {
        _ = pipeline.submit(device: device, session: "s", chunks: [Chunk(seq: seq, text: "chunk \(seq)")])
    }

    /// With a one-minute interval: the first chunk (a one-shot `send --text`) is acked at once; the next ones
    /// wait, sharing no fsync of their own, until as many chunks as `flushAt` wait — then one fsync covers them.
    @Test func aQuietDesktopAcksAtOnceAndLaterAdvancesShareOneFsync() throws {
        let root = DeliveryPipelineTests.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (pipeline, log, acks) = try pipeline(CommitPacing(intervalNanoseconds: 60_000_000_000, flushAt: 10),
                                                 root: root)
        defer { pipeline.stop() }
        submit(pipeline, 1)
        try waitUntil("the first chunk acked without waiting the interval") { acks.last == 1 }
        #expect(log.syncStatus.syncs == 1)

        for seq in UInt64(2)...10 { submit(pipeline, seq) }  // 9 chunks wait: under flushAt
        try waitUntil("the sink took them") { log.progress(sink: "fifo", device: device, session: "s") == 10 }
        usleep(200_000)
        #expect(acks.last == 1, "acked before the interval or flushAt")
        #expect(log.syncStatus.syncs == 1, "an fsync per advance")

        submit(pipeline, 11)  // the tenth waiting chunk ends the wait
        try waitUntil("acked once flushAt chunks waited") { acks.last == 11 }
        #expect(log.syncStatus.syncs == 2)
    }

    /// Paced, the waiting advance is fsynced when the interval ends with no more input; stopping flushes at once.
    @Test func aWaitingAdvanceIsFsyncedWhenTheIntervalEndsOrThePipelineStops() throws {
        let root = DeliveryPipelineTests.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (short, _, acks) = try pipeline(CommitPacing(intervalNanoseconds: 50_000_000, flushAt: 1_000),
                                            root: root)
        submit(short, 1)
        try waitUntil("first ack") { acks.last == 1 }
        submit(short, 2)
        try waitUntil("the waiting chunk acked when the interval ended") { acks.last == 2 }
        short.stop()

        let other = DeliveryPipelineTests.directory()
        defer { try? FileManager.default.removeItem(atPath: other) }
        let (long, log, stopped) = try pipeline(CommitPacing(intervalNanoseconds: 60_000_000_000, flushAt: 1_000),
                                                root: other)
        submit(long, 1)
        try waitUntil("first ack") { stopped.last == 1 }
        submit(long, 2)
        // Its advance waiting for the committer: not just its progress record, which the runner writes a moment
        // before it hands the advance over (a stop in between finds nothing pending and flushes nothing).
        try waitUntil("the sink took it") {
            log.progress(sink: "fifo", device: device, session: "s") == 2 && long.lock.locked { long.levels.hasPending }
        }
        long.stop()
        try waitUntil("stop flushed the waiting advance") { stopped.last == 2 }
    }

    /// The contract pacing must keep: every ack is sent after an fsync that covered the chunk's progress record
    /// (chunk n is the log's n-th line here), and acks never go down. Many chunks, paced and bursty.
    @Test func noAckPrecedesTheFsyncOfItsProgressRecord() throws {
        let root = DeliveryPipelineTests.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (pipeline, log, acks) = try pipeline(CommitPacing(intervalNanoseconds: 2_000_000, flushAt: 16),
                                                 root: root)
        defer { pipeline.stop() }
        var seq: UInt64 = 0
        for round in 0..<40 {
            for _ in 0..<(round % 3 == 0 ? 20 : 1) {
                seq += 1
                submit(pipeline, seq)
            }
            usleep(500)
        }
        let last = seq
        try waitUntil("everything acked") { acks.last == last }
        let seen = acks.seen.withLock { $0 }
        for ack in seen {
            #expect(UInt64(ack.durableLines) >= ack.seq, "ack \(ack.seq) sent with \(ack.durableLines) lines fsynced")
        }
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.seq < $1.seq })
        #expect(log.syncStatus.syncs < Int(last), "every chunk had its own fsync")
    }

    /// An urgent submit (the first chunks of a connection: a one-shot `send --text` waiting for its ack) is fsynced
    /// as soon as the sink has it, even within the interval; a later, ordinary one waits again.
    @Test func anUrgentSubmitIsFsyncedWithoutThePacingWait() throws {
        let root = DeliveryPipelineTests.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (pipeline, log, acks) = try pipeline(CommitPacing(intervalNanoseconds: 60_000_000_000, flushAt: 1_000),
                                                 root: root)
        defer { pipeline.stop() }
        submit(pipeline, 1)
        try waitUntil("first ack") { acks.last == 1 }
        submit(pipeline, 2)
        try waitUntil("the sink took it") { log.progress(sink: "fifo", device: device, session: "s") == 2 }
        usleep(100_000)
        #expect(acks.last == 1, "an ordinary advance within the interval was not paced")
        _ = pipeline.submit(device: device, session: "s", chunks: [Chunk(seq: 3, text: "one shot")], urgent: true)
        try waitUntil("the urgent chunk acked within the interval") { acks.last == 3 }
        #expect(log.syncStatus.syncs == 2)
        submit(pipeline, 4)
        try waitUntil("the sink took it") { log.progress(sink: "fifo", device: device, session: "s") == 4 }
        usleep(100_000)
        #expect(acks.last == 3, "urgency outlived its chunks")
    }
}
