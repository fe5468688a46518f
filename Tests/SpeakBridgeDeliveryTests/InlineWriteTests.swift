import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore
import SpeakBridgeSupport
import Testing
@testable import SpeakBridgeDelivery

/// The inline write (`SinkRunner.enqueue`): an idle FIFO sink takes a chunk on the submitting thread (the daemon's
/// lws thread), but only what the pipe takes at once; a full pipe or a sink that may block (a tool, the fake here)
/// goes to the runner thread, in order with what is queued, and the submitting thread never waits. Real FIFOs, real
/// pipeline and progress log; the fake sink stands for a tool-running sink (xdotool, wl-copy) that is not here.
@Suite("Inline sink writes", .serialized)
struct InlineWriteTests {
    typealias SessionKey = DeliveryPipeline.SessionKey
    let alice = DeviceID(publicKeyDigest: SHA256.hash(Array("inline-alice".utf8)))
    let bob = DeviceID(publicKeyDigest: SHA256.hash(Array("inline-bob".utf8)))

    final class Acks: Sendable {
        let levels = Locked<[SessionKey: UInt64]>([:])
        func ack(_ key: SessionKey) -> UInt64 { levels.withLock { $0[key] ?? 0 } }
    }

    func pipeline(_ sinks: [any Sink], root: String) throws -> (DeliveryPipeline, Acks) {
        let acks = Acks()
        let pipeline = DeliveryPipeline(sinks: sinks, progress: try ProgressLog(path: root + "/progress.log"),
                                        onDurable: { advanced in
            acks.levels.withLock { for (key, seq) in advanced { $0[key] = max($0[key] ?? 0, seq) } }
        }, onDrained: { _ in })
        return (pipeline, acks)
    }

    /// Everything the FIFO holds now (non-blocking reads).
    func drain(_ fd: Int32) -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            guard n > 0 else { break }
            bytes += buffer[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A FIFO in `root` and a reader that is open but reads only when the test says so.
    func fifo(_ root: String) throws -> (FIFOSink, Int32) {
        let path = root + "/out.fifo"
        let sink = try FIFOSink(path: path)
        let reader = open(path, O_RDONLY | O_NONBLOCK)
        try #require(reader >= 0)
        return (sink, reader)
    }

    /// `fifo` and a pipeline over it, in a fresh directory; afterwards the pipeline stops (again, if `body` did),
    /// the reader closes and the directory goes.
    func withFIFOPipeline(_ body: (FIFOSink, Int32, DeliveryPipeline, Acks) throws -> Void) throws {
        let root = DeliveryPipelineTests.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (sink, reader) = try fifo(root)
        defer { close(reader) }
        let (pipeline, acks) = try pipeline([sink], root: root)
        defer { pipeline.stop() }
        try body(sink, reader, pipeline, acks)
    }

    /// The daemon looks a device's name up per submit only for a sink that may show it: a FIFO writes the text
    /// alone; any other sink (a jsonl file here, or one the pipeline does not know) counts as showing it.
    @Test func onlySinksThatMayShowTheNameNeedIt() throws {
        try withFIFOPipeline { _, _, pipeline, _ in #expect(!pipeline.showsDeviceNames) }
        let root = DeliveryPipelineTests.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (fifo, reader) = try fifo(root)
        defer { close(reader) }
        for sinks in [[fifo, try JSONLSink(path: root + "/out.jsonl")] as [any Sink], [FakeSink("tool", .recordBeforeWrite)]] {
            let (pipeline, _) = try pipeline(sinks, root: root)
            #expect(pipeline.showsDeviceNames)
            pipeline.stop()
        }
    }

    @Test func anIdleFIFOSinkWritesOnTheSubmittingThread() throws {
        try withFIFOPipeline { _, reader, pipeline, acks in
            for seq in UInt64(1)...5 {
                _ = pipeline.submit(device: alice, session: "s", chunks: [Chunk(seq: seq, text: "line \(seq)")])
                // Inline: the line is in the pipe when submit returns, with no other thread involved.
                #expect(drain(reader) == "line \(seq)\n")
            }
            try waitUntil("acked") { acks.ack(SessionKey(device: alice, session: "s")) == 5 }
        }
    }

    /// A sink that may block is never written inline: submit returns while its write is stuck.
    @Test func aSinkThatMayBlockIsNeverWrittenInline() throws {
        let root = DeliveryPipelineTests.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let stuck = FakeSink("type", .recordBeforeWrite, itemsPerWrite: 1, crash: .beforeWrite(1))
        let (pipeline, _) = try pipeline([stuck], root: root)
        _ = pipeline.submit(device: alice, session: "s", chunks: [Chunk(seq: 1, text: "typed")])
        // Reaching this line at all means the submitting thread did not run the (frozen) write.
        #expect(stuck.crashed.wait(timeout: .now() + 10) == .success, "the runner thread never wrote")
        pipeline.stop()
        stuck.release.signal()
        // The released runner reports to the pipeline (an unowned reference): keep it until that is done.
        withExtendedLifetime(pipeline) { _ = usleep(200_000) }
    }

    /// A reader that stops reading: the pipe fills, the rest queues on the runner, and the submitting thread keeps
    /// going (another device's chunks are taken at once, and nothing waits). When the reader reads again every
    /// line arrives once, in order per device — inline writes never overtake queued ones.
    @Test func aStalledReaderNeitherBlocksTheSubmitterNorReordersLines() throws {
        try withFIFOPipeline { _, reader, pipeline, acks in
            let text = String(repeating: "x", count: 1_000)
            // 200 KB for alice: far more than the pipe (64 KiB) holds, in messages of 10 chunks.
            let started = Date()
            for first in stride(from: UInt64(1), through: 200, by: 10) {
                _ = pipeline.submit(device: alice, session: "s",
                                    chunks: (first..<first + 10).map { Chunk(seq: $0, text: "a\($0) \(text)") })
            }
            for seq in UInt64(1)...20 {
                _ = pipeline.submit(device: bob, session: "s", chunks: [Chunk(seq: seq, text: "b\(seq)")])
            }
            #expect(Date().timeIntervalSince(started) < 5, "submit waited for the stalled reader")
            #expect(acks.ack(SessionKey(device: alice, session: "s")) < 200, "acked what the pipe cannot hold yet")

            var lines: [Substring] = []
            var pending = ""
            try waitUntil("every line read") {
                pending += drain(reader)
                if let cut = pending.lastIndex(of: "\n") {
                    lines += pending[...cut].split(separator: "\n")
                    pending = String(pending[pending.index(after: cut)...])
                }
                return lines.count >= 220
            }
            let a = lines.filter { $0.hasPrefix("a") }.map { UInt64($0.dropFirst().prefix { $0 != " " })! }
            let b = lines.filter { $0.hasPrefix("b") }.map { UInt64($0.dropFirst())! }
            #expect(a == Array(1...200))
            #expect(b == Array(1...20))
            try waitUntil("acked") {
                acks.ack(SessionKey(device: alice, session: "s")) == 200
                    && acks.ack(SessionKey(device: bob, session: "s")) == 20
            }
        }
    }

    /// A full pipe refuses a write after its progress was recorded (class (a): record, then write; the FIFO does
    /// not poll first): the record is rolled back, so the log never claims a line the pipe did not take — after a
    /// crash it would be skipped, lost without ever having been written.
    @Test func aWriteAFullPipeRefusedIsNotLeftRecorded() throws {
        try withFIFOPipeline { sink, reader, pipeline, _ in
            let text = String(repeating: "y", count: 1_000)
            for seq in UInt64(1)...100 {  // 100 KB into a 64 KiB pipe nobody reads
                _ = pipeline.submit(device: alice, session: "s", chunks: [Chunk(seq: seq, text: "\(seq) \(text)")])
            }
            pipeline.stop()
            try waitUntil("the runner stopped and closed the sink") { sink.health?.contains("closed") == true }
            let lines = drain(reader).split(separator: "\n")
            let last = try #require(lines.last.flatMap { UInt64($0.prefix { $0 != " " }) })
            #expect(lines.count < 100 && last == UInt64(lines.count))
            #expect(pipeline.progress.progress(sink: sink.label, device: alice, session: "s") == last)
        }
    }
}
