#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

/// Real processes, real sockets on 127.0.0.1, real FIFOs: a desktop home and a phone home side by side.
@Suite("End to end: delivery", .serialized)
struct DeliveryTests {
    static func lines(_ n: Int, prefix: String = "line") -> [String] { (1...n).map { "\(prefix) \($0) — é ✓" } }

    @Test("pair, then 1,000 lines arrive in order on a FIFO")
    func thousandLinesThroughFIFO() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (fifo, reader) = try pair.startWithFIFO("dictation")
        defer { reader.stop() }
        let expected = Self.lines(1_000)
        let sender = try pair.sendLines(expected)
        let outcome = try sender.wait(timeout: 60)
        #expect(outcome.status == 0, "send failed: \(outcome.stderr)")
        try Harness.wait("1,000 lines on the FIFO") { reader.count >= 1_000 }
        #expect(reader.snapshot == expected)
        // The FIFO was created private.
        var st = stat()
        #expect(stat(fifo, &st) == 0 && st.st_mode & 0o777 == 0o600)
        // Devices list shows the progress.
        let devices = try run(["devices", "--json"], home: pair.desktopHome).stdout
        #expect(devices.contains("\"name\":\"phone\""))
    }

    @Test("send while the daemon is down; it is delivered once the daemon starts")
    func sendBeforeDaemonStarts() throws {
        let pair = Pair()
        defer { pair.stop() }
        let fifo = pair.desktopHome + "/out"
        try pair.startDaemon(sinks: ["fifo:" + fifo])
        try pair.join()
        pair.daemon?.terminate()
        let sender = try pair.sendLines(["first", "second", "third"])
        usleep(1_500_000)
        #expect(sender.process.isRunning, "send must keep trying while the desktop is down")
        try pair.startDaemon(sinks: ["fifo:" + fifo])
        let reader = FifoReader(path: fifo)
        reader.start()
        defer { reader.stop() }
        #expect(try sender.wait(timeout: 60).status == 0)
        try Harness.wait("3 lines") { reader.count >= 3 }
        usleep(300_000)
        #expect(reader.snapshot == ["first", "second", "third"])
    }

    @Test("send --timeout counts per line: a slow stream the desktop keeps acknowledging is not cut off")
    func timeoutIsPerLine() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (_, reader) = try pair.startWithFIFO()
        defer { reader.stop() }
        let (sender, writer) = try pair.pipedSend(["--timeout", "1"], label: "slow-send")
        try writer.write(contentsOf: Data("first\n".utf8))
        try Harness.wait("the first line") { reader.count >= 1 }
        usleep(2_500_000)  // longer than --timeout, with nothing unacknowledged
        #expect(sender.process.isRunning, "send gave up although every line was acknowledged: \(sender.stderr)")
        try writer.write(contentsOf: Data("second\n".utf8))
        try writer.close()
        let outcome = try sender.wait(timeout: 30)
        #expect(outcome.status == 0, "send failed: \(outcome.stderr)")
        try Harness.wait("2 lines") { reader.count >= 2 }
        #expect(reader.snapshot == ["first", "second"])
    }

    @Test("kill -9 the client mid-burst, rerun send: every line exactly once")
    func killClientMidBurst() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (_, reader) = try pair.startWithFIFO()
        defer { reader.stop() }
        let all = Self.lines(3_000, prefix: "k")
        let first = try pair.sendLines(all, pace: 0.05)
        try Harness.wait("some lines delivered") { reader.count >= 200 }
        #expect(first.process.isRunning, "the client must be killed mid-stream")
        first.kill9()
        let seenAtKill = reader.count
        // Rerun with no new input: the journal's unacknowledged chunks go out.
        let flush = try run(["send"], home: pair.phoneHome, timeout: 60)
        #expect(flush.status == 0, "\(flush.stderr)")
        usleep(500_000)
        let delivered = reader.snapshot
        #expect(delivered.count >= seenAtKill)
        // Exactly once and in order: a prefix of the input, no duplicates.
        #expect(delivered == Array(all.prefix(delivered.count)))
        // Then the rest of the input completes the stream.
        let rest = try pair.sendLines(Array(all.dropFirst(delivered.count)), label: "rest")
        #expect(try rest.wait(timeout: 60).status == 0)
        try Harness.wait("all lines") { reader.count >= all.count }
        usleep(300_000)
        #expect(reader.snapshot == all)
    }

    @Test("kill -9 the daemon mid-burst, restart: every line exactly once")
    func killDaemonMidBurst() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (fifo, reader) = try pair.startWithFIFO()
        defer { reader.stop() }
        let all = Self.lines(3_000, prefix: "d")
        let sender = try pair.sendLines(all, pace: 0.05)
        try Harness.wait("some lines delivered") { reader.count >= 300 }
        #expect(reader.count < all.count, "the daemon must be killed mid-stream")
        pair.daemon?.kill9()
        usleep(300_000)
        try pair.startDaemon(sinks: ["fifo:" + fifo])
        #expect(try sender.wait(timeout: 90).status == 0)
        try Harness.wait("all lines") { reader.count >= all.count }
        usleep(500_000)
        let got = reader.snapshot
        #expect(got.count == all.count)
        #expect(got == all)
    }

    @Test("a FIFO without a reader for a while loses nothing; a reader that leaves loses nothing")
    func fifoWithoutReader() throws {
        let pair = Pair()
        defer { pair.stop() }
        let fifo = pair.desktopHome + "/late"
        try pair.startDaemon(sinks: ["fifo:" + fifo])
        try pair.join()
        let all = Self.lines(300, prefix: "f")
        let sender = try pair.sendLines(all)
        usleep(1_500_000)
        #expect(sender.process.isRunning, "nothing can be acknowledged while the FIFO has no reader")
        let status = try run(["status", "--json"], home: pair.desktopHome).stdout
        #expect(status.contains("\"healthy\":false"))
        // A first reader takes 50 lines and leaves.
        let first = FifoReader(path: fifo)
        first.start(stopAfter: 50)
        try Harness.wait("first reader") { first.count >= 50 }
        first.stop()
        usleep(500_000)
        let second = FifoReader(path: fifo)
        second.start()
        defer { second.stop() }
        #expect(try sender.wait(timeout: 60).status == 0)
        try Harness.wait("the rest") { first.count + second.count >= all.count }
        usleep(300_000)
        #expect(first.snapshot + second.snapshot == all)
    }

    @Test("a burst of plain lines (journaled and framed from their bytes; some blank, some CRLF) into a FIFO read late: each once, in order, never refused as too much")
    func plainBurstWithLateReader() throws {
        let pair = Pair()
        defer { pair.stop() }
        let fifo = pair.desktopHome + "/plain"
        try pair.startDaemon(sinks: ["fifo:" + fifo])
        try pair.join()
        var input: [String] = []
        var expected: [String] = []
        for i in 1...40_000 {
            let line = "plain line \(i) of a burst ~ {x} [y] 'z'"
            input.append(i % 1_000 == 0 ? line + "\r" : line)
            expected.append(line)
            if i % 777 == 0 { input.append("") }  // a blank line: skipped, as on the text path
            if i == 20_000 { input.append("then one é line"); expected.append("then one é line") }  // the text path
        }
        let sender = try pair.sendLines(input)
        // No reader yet: the backlog reaches the desktop's pause while the client's whole window is in flight.
        usleep(1_000_000)
        let reader = FifoReader(path: fifo)
        reader.start()
        defer { reader.stop() }
        #expect(try sender.wait(timeout: 120).status == 0)
        try Harness.wait("every line", timeout: 60) { reader.count >= expected.count }
        usleep(300_000)
        #expect(reader.snapshot == expected)
        let log = pair.daemon.map(\.stderr) ?? ""
        #expect(!log.contains("too much undelivered"), "the desktop refused the client's window")
        // Flow control is not news: the pauses are logged once per 10 s, a FIFO full for an instant not at all; the
        // reader missing for a second is said once.
        let pauses = log.components(separatedBy: "reading paused").count - 1
        #expect(pauses >= 1 && pauses <= 2, "\(pauses) pause lines")
        #expect(!log.contains("is full"))
        #expect(log.components(separatedBy: "no reader on FIFO").count - 1 <= 1)
    }

    /// A FIFO nobody reads for 36 s while `send` has 5,000 lines for it: the desktop holds them (and pauses reading
    /// past 2,048), and `send` waits on its one connection — past its 15 s ack timeout (the desktop said it holds)
    /// and lws's 30 s pong check (the desktop's unsolicited pongs). Before, it redialled every 15 s and resent its
    /// window, and each redial let the desktop read 512 more chunks. Then a reader gets every line once, in order.
    @Test("a long hold: send stays on its one connection without acks, then every line arrives once")
    func longHoldKeepsTheConnection() throws {
        let pair = Pair()
        defer { pair.stop() }
        let fifo = pair.desktopHome + "/held"
        try pair.startDaemon(sinks: ["fifo:" + fifo])
        try pair.join()
        let lines = (1...5_000).map { "held line \($0)" }
        // The input stays open through the hold (at its end `send` would give up after 30 s of waiting: exit 75).
        let (sender, input) = try pair.pipedSend()
        try input.write(contentsOf: Data(lines.map { $0 + "\n" }.joined().utf8))
        usleep(36_000_000)
        let during = sender.stderr
        #expect(during.contains("desktop holds line 1 at fifo:"), "\(during)")
        #expect(!during.contains("reconnecting") && !during.contains("waiting for the desktop"), "\(during)")
        // One pause for the whole hold (each reconnect paused a new connection, logged once per 10 s).
        let desktopLog = pair.daemon.map(\.stderr) ?? ""
        #expect(desktopLog.components(separatedBy: "reading paused").count - 1 == 1, "\(desktopLog)")
        let reader = FifoReader(path: fifo)
        reader.start()
        defer { reader.stop() }
        try input.close()
        #expect(try sender.wait(timeout: 60).status == 0)
        try Harness.wait("every line", timeout: 60) { reader.count >= lines.count }
        usleep(300_000)
        #expect(reader.snapshot == lines)
    }

    @Test("stdout sink: escape sequences from a peer are neutralized; --raw keeps them")
    func stdoutSanitized() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        let hostile = "clear\u{1B}[2J title\u{1B}]0;pwned\u{07} clip\u{1B}]52;c;ZXZpbA==\u{07} bell\u{07} ok"
        #expect(try pair.send([hostile, "plain é"]).status == 0)
        let out = pair.daemon!.stdout
        #expect(!out.contains("\u{1B}"))
        #expect(!out.contains("\u{07}"))
        #expect(out.contains("plain é\n"))
        #expect(out.contains("ok"))
        // --raw: the user opted out; the bytes pass unchanged.
        pair.daemon?.terminate()
        try pair.startDaemon(sinks: ["stdout"], extra: ["--raw"])
        #expect(try pair.send(["\u{1B}[1mbold\u{1B}[0m"]).status == 0)
        #expect(pair.daemon!.stdout == "\u{1B}[1mbold\u{1B}[0m\n")
    }
}
