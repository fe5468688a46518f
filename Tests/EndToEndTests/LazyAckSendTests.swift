import Foundation
import Testing

/// Issue 13: while lines keep coming, `send` reads its acks between lines (Sender+LazyAcks.swift): an ack wakes
/// nobody; at 100 ms apart the socket thread wakes for the line and for the write's 50 ms durability deadline
/// (where it reads the ack instead of making an fsync: Sender+Clock.swift), at most twice a line. Nothing is lost or repeated for it: the end of
/// input still waits for every ack, and a desktop restarted mid-stream gets every line exactly once. Real daemon,
/// real FIFO, real `send`.
@Suite("End to end: send reads acks between lines", .serialized)
struct LazyAckSendTests {
    @Test("lines 100 ms apart: at most two sleeps of the socket thread a line; at the end every line acknowledged, exit 0")
    func oneWakeUpALine() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (_, reader) = try pair.startWithFIFO()
        defer { reader.stop() }
        let (send, writer) = try pair.pipedSend(label: "lazy-send")
        defer { send.terminate() }
        try writer.write(contentsOf: Data("first\n".utf8))
        try Harness.wait("the first line on the FIFO") { reader.snapshot == ["first"] }
        usleep(700_000)  // acknowledged, and the input paused for longer than the lazy interval
        let before = try #require(HumanPaceSendTests.sleeps(send.pid, thread: "sb-ws-client"))
        let lines = 12
        for i in 1...lines {
            try writer.write(contentsOf: Data("phrase \(i)\n".utf8))
            try Harness.wait("phrase \(i) on the FIFO") { reader.count == i + 1 }
            usleep(100_000)  // its ack comes meanwhile (the desktop fsyncs at once after a quiet spell)
        }
        let after = try #require(HumanPaceSendTests.sleeps(send.pid, thread: "sb-ws-client"))
        try writer.close()
        let outcome = try send.wait(timeout: 30)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(reader.snapshot == ["first"] + (1...lines).map { "phrase \($0)" })
        // Every line acknowledged before the exit: the journal holds nothing.
        let outbox = try run(["outbox"], home: pair.phoneHome)
        #expect(outbox.status == 0 && !outbox.stdout.contains("queued"), "\(outbox.stdout)")

        // The line's wake-up and its deadline's look. A few spare for a loaded machine.
        let woke = after - before
        if ProcessInfo.processInfo.environment["SPEAKBRIDGE_SANITIZER"] == nil {
            #expect(woke <= 2 * lines + 4, "the socket thread slept \(woke) times for \(lines) lines")
        }
    }

    @Test("the desktop restarted while lines come 100 ms apart: every line exactly once, in order")
    func desktopRestartMidStream() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (fifo, reader) = try pair.startWithFIFO()
        defer { reader.stop() }
        let (send, writer) = try pair.pipedSend(label: "lazy-restart")
        defer { send.terminate() }
        let all = (1...40).map { "spoken \($0)" }
        for (i, line) in all.enumerated() {
            try writer.write(contentsOf: Data((line + "\n").utf8))
            usleep(100_000)
            if i == 14 {
                pair.daemon?.terminate()
                try pair.startDaemon(sinks: ["fifo:" + fifo])
            }
            if i == 29 {
                pair.daemon?.kill9()
                try pair.startDaemon(sinks: ["fifo:" + fifo])
            }
        }
        try writer.close()
        let outcome = try send.wait(timeout: 60)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        try Harness.wait("every line") { reader.count >= all.count }
        usleep(300_000)
        #expect(reader.snapshot == all)
    }
}
