import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeSupport
import Testing
@testable import SpeakBridgeDelivery

/// The heap is trimmed when the pipeline falls quiet (nothing committed for a second) after a burst (`HeapTrim`,
/// glibc's `malloc_trim`), never after or during a trickle, also one past the burst threshold; and a trim really
/// gives freed heap pages back to the kernel.
@Suite("Heap trim after a burst", .serialized)
struct HeapTrimTests {
    let device = DeviceID(publicKeyDigest: SHA256.hash(Array("trim-device".utf8)))

    func pipeline(root: String) throws -> (DeliveryPipeline, Locked<UInt64>) {
        let log = try ProgressLog(path: root + "/progress.log")
        let acked = Locked<UInt64>(0)
        let pipeline = DeliveryPipeline(
            sinks: [FakeSink("fifo", .recordBeforeWrite)], progress: log,
            pacing: CommitPacing(intervalNanoseconds: 5_000_000, flushAt: 1_024),
            onDurable: { advanced in acked.withLock { value in for (_, seq) in advanced { value = max(value, seq) } } },
            onDrained: { _ in })
        return (pipeline, acked)
    }

    func submit(_ pipeline: DeliveryPipeline, from: UInt64, count: UInt64) {
        var seq = from
        while seq < from + count {
            let batch = (seq..<min(from + count, seq + 256)).map { Chunk(seq: $0, text: "chunk \($0) of a burst") }
            _ = pipeline.submit(device: device, session: "s", chunks: batch)
            seq += UInt64(batch.count)
        }
    }

    @Test func aBurstThenQuietTrimsOnceATrickleNever() throws {
        let root = DeliveryPipelineTests.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (pipeline, acked) = try pipeline(root: root)
        defer { pipeline.stop() }
        // A trickle: 100 chunks one by one, each acked before the next.
        for seq in UInt64(1)...100 {
            submit(pipeline, from: seq, count: 1)
            try waitUntil("chunk \(seq) acked", timeout: 20) { acked.withLock { $0 } == seq }
        }
        usleep(50_000)
        #expect(pipeline.lock.withLock { pipeline.trims } == 0, "trimmed after a trickle")
        // A burst past the threshold, then quiet: one trim.
        let burst = UInt64(DeliveryPipeline.trimAfterChunks) + 1_000
        submit(pipeline, from: 101, count: burst)
        try waitUntil("the burst acked", timeout: 20) { acked.withLock { $0 } == 100 + burst }
        let quietFrom = Date()
        try waitUntil("trimmed once the pipeline fell quiet", timeout: 20) {
            pipeline.lock.withLock { pipeline.trims } == 1
        }
        // Only after the quiet spell (1 s from the last fsync's start, which came before the ack was seen).
        #expect(Date().timeIntervalSince(quietFrom) > 0.5)
        usleep(50_000)
        #expect(pipeline.lock.withLock { pipeline.trims } == 1)
    }

    /// A trickle slower than the pacing interval leaves the pipeline empty between fsyncs all the time: however many chunks
    /// such a trickle commits, it is not quiet, so it never trims (a trim holds glibc's arena locks while it walks
    /// the heap). Before, any moment with nothing pending after 4,096 chunks trimmed, in the middle of traffic.
    @Test func aSteadyTricklePastTheThresholdNeverTrims() throws {
        let root = DeliveryPipelineTests.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (pipeline, acked) = try pipeline(root: root)
        defer { pipeline.stop() }
        // 64 chunks every 10 ms or so (slower than the 5 ms pacing interval, as a line every 100 ms from one
        // device is beside 25 ms), never waiting for acks: each batch is committed before the next comes, so the
        // pipeline is empty between them while the trickle goes on.
        let total = UInt64(DeliveryPipeline.trimAfterChunks) * 2
        var seq: UInt64 = 1
        var sawEmpty = false
        while seq <= total {
            submit(pipeline, from: seq, count: 64)
            seq += 64
            usleep(10_000)
            if pipeline.lock.withLock({ pipeline.levels.pending.isEmpty }) { sawEmpty = true }
        }
        // Asked while the trickle is still going (a trim after it ends would be right: that is a quiet spell).
        #expect(pipeline.lock.withLock { pipeline.trims } == 0, "trimmed in the middle of a trickle")
        #expect(pipeline.lock.withLock { pipeline.committedSinceTrim } >= DeliveryPipeline.trimAfterChunks)
        #expect(sawEmpty, "the trickle never left the pipeline empty between commits (the case this pins)")
        try waitUntil("the trickle acked", timeout: 20) { acked.withLock { $0 } == seq - 1 }
    }

    /// 64 MiB in 4 KiB blocks on another thread (its own arena, as the lws thread's), freed: the trim returns
    /// most of it (glibc keeps freed blocks below the top of a thread's arena otherwise).
    /// Not under `make sanitize`: ASan's and TSan's allocators replace glibc's heap, so malloc_trim has nothing to
    /// return there.
    @Test(.disabled(if: ProcessInfo.processInfo.environment["SPEAKBRIDGE_SANITIZER"] != nil,
                    "a sanitizer's allocator replaces glibc's heap"))
    func aTrimGivesFreedPagesBack() throws {
        func rssKiB() -> Int {
            let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var blocks: [UnsafeMutableRawPointer] = []
            for _ in 0..<16_384 {
                let block = malloc(4_096)!
                memset(block, 1, 4_096)
                blocks.append(block)
            }
            // Keep the last block, so the arena's top stays in use and only a trim (not free) can return pages.
            for block in blocks.dropLast() { free(block) }
            done.signal()
            usleep(500_000)
            free(blocks.last!)
        }
        done.wait()
        let before = rssKiB()
        #expect(HeapTrim.releaseFreePages())
        let after = rssKiB()
        #expect(before - after > 32 * 1_024, "RSS \(before) → \(after) KiB")
    }
}
