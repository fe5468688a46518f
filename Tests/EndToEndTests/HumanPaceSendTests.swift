import Foundation
import Testing

/// Issue 13, human pace (a phrase every 0.1–2 s, how a phone dictates). A journal write must be durable within
/// 50 ms: fsynced, or acknowledged by the desktop (whose copy is durable: Sender+Clock.swift). So while the desktop
/// acknowledges every line in time, `send` makes no fsync for it and wakes its socket thread at most twice a line
/// (the line; the write's deadline, where it reads the ack); when the desktop does not answer, every line's journal
/// write is fsynced by its deadline, on one long-lived thread. Real daemon, real FIFO, real `send`.
@Suite("End to end: send at human pace", .serialized)
struct HumanPaceSendTests {
    /// Voluntary context switches (sleeps) so far of `pid`'s thread named `name`.
    static func sleeps(_ pid: Int32, thread name: String) -> Int? {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for task in tasks {
            let comm = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)) ?? ""
            guard comm.trimmingCharacters(in: .whitespacesAndNewlines) == name,
                  let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)
            else { continue }
            for line in status.split(separator: "\n") where line.hasPrefix("voluntary_ctxt_switches:") {
                return Int(line.split(separator: "\t").last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "")
            }
        }
        return nil
    }

    /// The IDs of `pid`'s threads named `name`.
    static func threads(_ pid: Int32, named name: String) -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.filter { task in
            let comm = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)) ?? ""
            return comm.trimmingCharacters(in: .whitespacesAndNewlines) == name
        }.sorted()
    }

    /// A paired desktop with a FIFO and its reader, and a traced streaming `send` whose first line is on the FIFO,
    /// acknowledged and quiet (300 ms later). The caller stops `pair`, `reader` and `send`.
    static func tracedSend(label: String) throws -> (pair: Pair, reader: FifoReader, send: Proc, writer: FileHandle,
                                                     trace: String) {
        let pair = Pair()
        let (_, reader) = try pair.startWithFIFO()
        signal(SIGPIPE, SIG_IGN)
        let trace = pair.phoneHome + "/trace.txt"
        let pipe = Pipe()
        let send = try Proc(["send"], home: pair.phoneHome, stdin: pipe.fileHandleForReading,
                            env: ["SPEAKBRIDGE_TRACE": trace], label: label)
        let writer = pipe.fileHandleForWriting
        try writer.write(contentsOf: Data("first\n".utf8))
        try Harness.wait("the first line on the FIFO") { reader.snapshot == ["first"] }
        usleep(300_000)  // acknowledged, journaled, quiet
        return (pair, reader, send, writer, trace)
    }

    @Test("paced lines the desktop acknowledges at once: (almost) no journal fsync, at most two wake-ups a line")
    func humanPaceAcknowledged() throws {
        let (pair, reader, send, writer, trace) = try Self.tracedSend(label: "paced-send")
        defer { pair.stop() }
        defer { reader.stop() }
        defer { send.terminate() }
        let before = try #require(Self.sleeps(send.pid, thread: "sb-ws-client"))
        let lines = 8
        let clock = ContinuousClock()
        var slowest = Duration.zero  // the longest a line took from this test's write to the FIFO
        for i in 1...lines {
            let written = clock.now
            try writer.write(contentsOf: Data("phrase \(i)\n".utf8))
            try Harness.wait("phrase \(i) on the FIFO") { reader.count == i + 1 }
            slowest = max(slowest, clock.now - written)
            usleep(150_000)  // its ack (after the desktop's fsync) and its write's deadline, 50 ms after it
        }
        let after = try #require(Self.sleeps(send.pid, thread: "sb-ws-client"))
        try writer.close()
        let outcome = try send.wait(timeout: 30)
        #expect(outcome.status == 0, "\(outcome.stderr)")

        let marks = TraceTests.marks(try String(contentsOfFile: trace, encoding: .utf8))
        #expect((marks["journal"] ?? []).count == lines + 1)
        // What follows holds only while the desktop acknowledges in time: an ack later than 45 ms costs its line an
        // fsync and a wake-up, by design. When the machine is that loaded (the suite runs tests in parallel; seen: a
        // line taking 60 ms to reach the FIFO), the counts say nothing about `send`, so they are not asserted then;
        // on a quieter machine (this suite alone, a CI run that is not starved) they are.
        let inTime = slowest < .milliseconds(15) && ProcessInfo.processInfo.environment["SPEAKBRIDGE_SANITIZER"] == nil
        guard inTime else { return }
        // The line's wake-up and its deadline's (which reads the ack; the lazy tick 0.5 s later is not needed then),
        // and a few spare.
        let woke = after - before
        #expect(woke <= 2 * lines + 4, "the socket thread slept \(woke) times for \(lines) lines")
        // The seventh session's `send` fsynced every line (lines + 1).
        #expect((marks["jsync"] ?? []).count <= lines / 2, "most lines were acknowledged in time: \(marks["jsync"] ?? [])")
    }

    @Test("paced lines the desktop does not answer (stopped): each journal write fsynced, on one thread; all delivered once it answers")
    func humanPaceUnanswered() throws {
        let (pair, reader, send, writer, trace) = try Self.tracedSend(label: "unanswered-send")
        defer { pair.stop() }
        defer { reader.stop() }
        defer { send.terminate() }
        let daemon = try #require(pair.daemon)
        kill(daemon.pid, SIGSTOP)  // connected, but no ack comes
        var resumed = false
        defer { if !resumed { kill(daemon.pid, SIGCONT) } }
        let lines = 4
        for i in 1...lines {
            try writer.write(contentsOf: Data("phrase \(i)\n".utf8))
            usleep(200_000)  // past the write's 50 ms deadline
        }
        let syncThread = Self.threads(send.pid, named: "sb-fsync")
        #expect(syncThread.count == 1, "\(syncThread)")
        // Each write's fsync comes by its deadline, 50 ms after it; a starved machine may run it later, so the test
        // waits (a bound that only catches a write never synced) before it looks.
        var journal: [UInt64] = [], syncs: [UInt64] = []
        try? Harness.wait("an fsync after every journal write") {
            let marks = TraceTests.marks((try? String(contentsOfFile: trace, encoding: .utf8)) ?? "")
            journal = (marks["journal"] ?? []).map(\.0).sorted()
            syncs = (marks["jsync"] ?? []).map(\.0).sorted()
            return journal.count == lines + 1 && journal.dropFirst().allSatisfy { at in syncs.contains { $0 > at } }
        }
        #expect(journal.count == lines + 1, "\(journal)")
        for (i, at) in journal.enumerated().dropFirst() {  // the first line was acknowledged in time
            // Handed over at the write's deadline; on a loaded machine the fsync may end after the next line's write.
            #expect(syncs.contains { $0 > at }, "no fsync after the journal write of line \(i)")
        }
        kill(daemon.pid, SIGCONT)
        resumed = true
        try writer.close()
        let outcome = try send.wait(timeout: 30)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        try Harness.wait("every line") { reader.count == lines + 1 }
        #expect(reader.snapshot == ["first"] + (1...lines).map { "phrase \($0)" })
        #expect(Self.threads(send.pid, named: "sb-fsync").count <= 1)
    }
}
