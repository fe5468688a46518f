import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore
import SpeakBridgeSupport
import Testing
@testable import SpeakBridgeDelivery

/// The real pipeline (runner threads, progress log on disk, group commit) with in-memory sinks: what a crash
/// between a progress record and a write does for each `DeliveryClass`, counted exactly; `onHeld`; revocation.
@Suite("Delivery pipeline", .serialized)
struct DeliveryPipelineTests {
    typealias SessionKey = DeliveryPipeline.SessionKey
    let device = DeviceID(publicKeyDigest: SHA256.hash(Array("pipeline-device".utf8)))
    var key: SessionKey { SessionKey(device: device, session: "s") }

    /// What the callbacks saw.
    final class Observed: Sendable {
        let acks = Locked<[SessionKey: UInt64]>([:])
        let held = Locked<[(label: String, reason: String?, held: [DeliveryPipeline.HeldChunk])]>([])

        func ack(_ key: SessionKey) -> UInt64 { acks.withLock { $0[key] ?? 0 } }
    }

    static func directory() -> String {
        let path = "/tmp/sb-pipeline-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(path, 0o700)
        return path
    }

    func pipeline(_ sinks: [any Sink], _ log: ProgressLog,
                  limits: BacklogMeter.Limits = .desktop) -> (DeliveryPipeline, Observed) {
        let observed = Observed()
        let pipeline = DeliveryPipeline(sinks: sinks, progress: log, limits: limits, onDurable: { advanced in
            observed.acks.withLock { for (key, seq) in advanced { $0[key] = max($0[key] ?? 0, seq) } }
        }, onDrained: { _ in }, onHeld: { label, reason, held in
            observed.held.withLock { $0.append((label, reason, held)) }
        })
        return (pipeline, observed)
    }

    func chunks(_ range: ClosedRange<UInt64>) -> [Chunk] { range.map { Chunk(seq: $0, text: "chunk \($0)") } }

    struct HarnessTimeout: Error { var what: String }

    /// Streams chunks 1…n into one sink of `deliveryClass` until it "crashes" at `crash`; then restarts as the
    /// desktop would — the progress log as the killed process left it (every record written so far: `record` is
    /// one write(2)), a new pipeline and sink over the same medium — and resends what the new desktop's ack level
    /// does not cover, as the client and the ledger would. Returns what the medium shows lost and repeated.
    func crashAndRestart(_ deliveryClass: DeliveryClass, _ crash: FakeSink.CrashPoint, n: UInt64 = 10)
        throws -> (lost: [UInt64], repeated: [UInt64]) {
        let root = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let medium = FakeMedium()
        let dying = FakeSink("fake", deliveryClass, medium: medium, crash: crash)
        let (first, _) = pipeline([dying], try ProgressLog(path: root + "/progress.log"))
        _ = first.submit(device: device, session: "s", chunks: chunks(1...n))
        #expect(dying.crashed.wait(timeout: .now() + 10) == .success, "the sink never reached its crash point")
        // The disk as the killed process left it.
        mkdir(root + "/after", 0o700)
        try FileIO.atomicWrite(root + "/after/progress.log", try #require(try FileIO.read(root + "/progress.log")))
        first.stop()
        dying.release.signal()

        let (second, observed) = pipeline([FakeSink("fake", deliveryClass, medium: medium)],
                                          try ProgressLog(path: root + "/after/progress.log"))
        defer { second.stop() }
        let resumeFrom = (second.durableLevels()[key] ?? 0) + 1
        if resumeFrom <= n { _ = second.submit(device: device, session: "s", chunks: chunks(resumeFrom...n)) }
        try waitUntil("every chunk acked after the restart") { observed.ack(key) == n || resumeFrom > n }
        return medium.tally(through: n)
    }

    // Two items per write: write 3 carries chunks 5 and 6.

    @Test func classARecordBeforeWriteLosesExactlyTheWriteACrashInterruptsAndRepeatsNothing() throws {
        let (lost, repeated) = try crashAndRestart(.recordBeforeWrite, .beforeWrite(3))
        #expect(lost == [5, 6])
        #expect(repeated.isEmpty)
        let after = try crashAndRestart(.recordBeforeWrite, .afterWrite(3))
        #expect(after.lost.isEmpty && after.repeated.isEmpty)
    }

    @Test func classBRecordAfterWriteRepeatsExactlyTheWriteACrashInterruptsAndLosesNothing() throws {
        let (lost, repeated) = try crashAndRestart(.recordAfterWrite, .afterWrite(3))
        #expect(lost.isEmpty)
        #expect(repeated == [5, 6])
        let before = try crashAndRestart(.recordAfterWrite, .beforeWrite(3))
        #expect(before.lost.isEmpty && before.repeated.isEmpty)
    }

    @Test func classCOwnPositionNeitherLosesNorRepeatsAtAnyCrashPoint() throws {
        for crash in [FakeSink.CrashPoint.beforeWrite(1), .afterWrite(1), .beforeWrite(3), .afterWrite(3), .afterWrite(5)] {
            let (lost, repeated) = try crashAndRestart(.ownPosition, crash)
            #expect(lost.isEmpty && repeated.isEmpty, "crash \(crash): lost \(lost), repeated \(repeated)")
        }
    }

    /// Each sink resumes from its own level: a class-(a) sink that lost a write does not hold back, or repeat
    /// into, a class-(c) sink that had everything.
    @Test func sinksOfDifferentClassesResumeEachFromItsOwnLevel() throws {
        let root = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let raw = FakeMedium()
        let own = FakeMedium()
        let dying = FakeSink("raw", .recordBeforeWrite, medium: raw, crash: .beforeWrite(3))
        let (first, _) = pipeline([dying, FakeSink("own", .ownPosition, medium: own)],
                                  try ProgressLog(path: root + "/progress.log"))
        _ = first.submit(device: device, session: "s", chunks: chunks(1...10))
        #expect(dying.crashed.wait(timeout: .now() + 10) == .success)
        try waitUntil("the other sink took everything") { own.items.count == 10 }
        mkdir(root + "/after", 0o700)
        try FileIO.atomicWrite(root + "/after/progress.log", try #require(try FileIO.read(root + "/progress.log")))
        first.stop()
        dying.release.signal()

        let (second, observed) = pipeline([FakeSink("raw", .recordBeforeWrite, medium: raw),
                                           FakeSink("own", .ownPosition, medium: own)],
                                          try ProgressLog(path: root + "/after/progress.log"))
        defer { second.stop() }
        #expect(second.durableLevels()[key] == 6)
        _ = second.submit(device: device, session: "s", chunks: chunks(7...10))
        try waitUntil("acked") { observed.ack(key) == 10 }
        #expect(raw.tally(through: 10).lost == [5, 6] && raw.tally(through: 10).repeated.isEmpty)
        #expect(own.seqs == Array(1...10))
    }

    /// A sink that cannot work tells which sessions it holds from which seq, and when it works again.
    @Test func aFailingSinkReportsWhatItHoldsAndWhenItRecovers() throws {
        let root = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let sink = FakeSink("clipboard", .recordBeforeWrite, itemsPerWrite: 1)
        sink.controls.withLock { $0.failure = "xclip: Can't open display :57" }
        let (pipeline, observed) = pipeline([sink], try ProgressLog(path: root + "/progress.log"))
        defer { pipeline.stop() }
        _ = pipeline.submit(device: device, session: "s", chunks: chunks(1...3))
        try waitUntil("held reported") { !observed.held.withLock { $0.isEmpty } }
        let report = try #require(observed.held.withLock { $0.first })
        #expect(report.label == "clipboard" && report.reason == "xclip: Can't open display :57")
        #expect(report.held == [DeliveryPipeline.HeldChunk(device: device, session: "s", firstHeldSeq: 1)])
        #expect(pipeline.health().first?.problem == "xclip: Can't open display :57")
        #expect(observed.ack(key) == 0)
        usleep(600_000)
        #expect(observed.held.withLock { $0.count } == 1, "the same problem is reported once, not per retry")

        sink.controls.withLock { $0.failure = nil }
        try waitUntil("acked") { observed.ack(key) == 3 }
        try waitUntil("cleared") { observed.held.withLock { $0.last?.reason == nil } }
        #expect(observed.held.withLock { $0.last?.held.first?.session } == "s")
        #expect(sink.medium.seqs == [1, 2, 3])
    }

    @Test func aSinkThatIsNotReadyForASecondIsReportedHeld() throws {
        let root = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let sink = FakeSink("fifo:/x", .recordBeforeWrite)
        sink.controls.withLock { $0.notReady = "no reader on FIFO /x" }
        let (pipeline, observed) = pipeline([sink], try ProgressLog(path: root + "/progress.log"))
        defer { pipeline.stop() }
        _ = pipeline.submit(device: device, session: "s", chunks: chunks(1...2))
        try waitUntil("held reported") { observed.held.withLock { $0.first?.reason } == "no reader on FIFO /x" }
        sink.controls.withLock { $0.notReady = nil }
        try waitUntil("acked and cleared") { observed.ack(key) == 2 && observed.held.withLock { $0.last?.reason == nil } }
    }

    /// Revoking through the pipeline drops the device's progress from the log too, durably; other devices keep
    /// theirs. (Before, `forget` dropped only the in-memory levels and left the log to the daemon.)
    @Test func revokeDropsTheDevicesProgressFromTheLog() throws {
        let root = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let other = DeviceID(publicKeyDigest: SHA256.hash(Array("other-device".utf8)))
        let otherKey = SessionKey(device: other, session: "o")
        do {
            let (pipeline, observed) = pipeline([FakeSink("stdout", .recordBeforeWrite)],
                                                try ProgressLog(path: root + "/progress.log"))
            _ = pipeline.submit(device: device, session: "s", chunks: chunks(1...4))
            _ = pipeline.submit(device: other, session: "o", chunks: chunks(1...2))
            try waitUntil("acked") { observed.ack(key) == 4 && observed.ack(otherKey) == 2 }
            pipeline.forget(device)
            #expect(pipeline.durableLevels()[key] == nil)
            #expect(pipeline.progress.entries().keys.allSatisfy { $0.device == other })
            try pipeline.progress.sync()
            pipeline.stop()
        }
        let reopened = try ProgressLog(path: root + "/progress.log")
        #expect(reopened.entries().keys.map(\.device) == [other])
        let (again, _) = pipeline([FakeSink("stdout", .recordBeforeWrite)], reopened)
        defer { again.stop() }
        #expect(again.durableLevels() == [otherKey: 2])
    }

    /// Revoking a device while a slow sink (a tool typing its lines one run at a time) is writing a backlog of it:
    /// the write under way finishes, nothing more of the device is written, another device's lines all are, and
    /// none of the revoked device's levels, backlog or progress is left. Before, every queued line was written
    /// after the revocation (up to the high-water mark: minutes of typing), and their records brought the device
    /// back into the progress log.
    @Test func revokeStopsTheDevicesLinesASinkIsWriting() throws {
        let root = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let other = DeviceID(publicKeyDigest: SHA256.hash(Array("other-device".utf8)))
        let otherKey = SessionKey(device: other, session: "o")
        let sink = FakeSink("type", .recordBeforeWrite, itemsPerWrite: 1)
        sink.controls.withLock { $0.hold = 3 }
        // Limits low enough that the device's 50 lines throttle it (its connections would stop being read).
        let limits = BacklogMeter.Limits(highChunks: 20, highBytes: 1 << 20, lowChunks: 5, lowBytes: 1 << 19,
                                         hardChunks: 100, hardBytes: 2 << 20)
        let (pipeline, observed) = pipeline([sink], try ProgressLog(path: root + "/progress.log"), limits: limits)
        defer { pipeline.stop() }
        #expect(pipeline.submit(device: device, session: "s", chunks: chunks(1...50)) == .pause)
        #expect(sink.holding.wait(timeout: .now() + 10) == .success, "the sink never started its third write")
        #expect(pipeline.isThrottled(device))
        _ = pipeline.submit(device: other, session: "o", chunks: chunks(1...5))
        pipeline.forget(device)
        #expect(pipeline.undelivered(device) == BacklogMeter.Level())
        sink.resume.signal()
        try waitUntil("the other device acked") { observed.ack(otherKey) == 5 }
        let shown = sink.medium.items
        #expect(shown.filter { $0.device == device }.map(\.seq) == [1, 2, 3])
        #expect(shown.filter { $0.device == other }.map(\.seq) == [1, 2, 3, 4, 5])
        #expect(pipeline.runners[0].queuedCount == 0)
        #expect(pipeline.durableLevels().keys.allSatisfy { $0.device == other })
        #expect(pipeline.progress.entries().keys.allSatisfy { $0.device == other })
        #expect(!pipeline.isThrottled(device))
    }

    /// The device's lines still queued behind another device's write are dropped at the revocation itself; the
    /// device paired again (the same key) streams as usual.
    @Test func revokeDropsQueuedLinesAndTheDeviceCanComeBack() throws {
        let root = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let other = DeviceID(publicKeyDigest: SHA256.hash(Array("other-device".utf8)))
        let sink = FakeSink("type", .recordBeforeWrite, itemsPerWrite: 1)
        sink.controls.withLock { $0.hold = 1 }
        let (pipeline, observed) = pipeline([sink], try ProgressLog(path: root + "/progress.log"))
        defer { pipeline.stop() }
        _ = pipeline.submit(device: other, session: "o", chunks: chunks(1...2))
        #expect(sink.holding.wait(timeout: .now() + 10) == .success)
        _ = pipeline.submit(device: device, session: "s", chunks: chunks(1...20))
        #expect(pipeline.runners[0].queuedCount == 22)
        pipeline.forget(device)
        #expect(pipeline.runners[0].queuedCount == 2, "the revoked device's 20 queued lines are still queued")
        #expect(pipeline.undelivered(device) == BacklogMeter.Level())
        sink.resume.signal()
        try waitUntil("the other device acked") { observed.ack(SessionKey(device: other, session: "o")) == 2 }
        _ = pipeline.submit(device: device, session: "again", chunks: chunks(1...3))
        try waitUntil("the device paired again acked") { observed.ack(SessionKey(device: device, session: "again")) == 3 }
        #expect(sink.medium.items.filter { $0.device == device }.map(\.session) == ["again", "again", "again"])
    }

    /// A sink added to `serve` joins at the level the others reached; it does not replay history.
    @Test func aNewSinkJoinsAtTheOthersLevel() throws {
        let root = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let log = try ProgressLog(path: root + "/progress.log")
        try log.record(sink: "stdout", device: device, session: "s", seq: 5)
        let added = FakeSink("jsonl:/x", .recordAfterWrite)
        let (pipeline, observed) = pipeline([FakeSink("stdout", .recordBeforeWrite), added], log)
        defer { pipeline.stop() }
        #expect(pipeline.durableLevels()[key] == 5)
        _ = pipeline.submit(device: device, session: "s", chunks: chunks(5...7))  // 5 again: skipped by both
        try waitUntil("acked") { observed.ack(key) == 7 }
        #expect(added.medium.seqs == [6, 7])
    }
}
