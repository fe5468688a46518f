import Foundation
import Testing

/// Issue 13: the per-stage trace (`SPEAKBRIDGE_TRACE=FILE`) that `make bench` turns into a table, and the one-shot
/// `send` that no longer waits a fixed 50 ms for its bye. Real daemon, real FIFO, real `send`.
@Suite("End to end: per-stage trace and the one-shot bye", .serialized)
struct TraceTests {
    /// Parses `STAGE NANOSECONDS VALUE` lines into stage -> [(ns, value)].
    static func marks(_ text: String) -> [String: [(UInt64, UInt64)]] {
        var out: [String: [(UInt64, UInt64)]] = [:]
        for line in text.split(separator: "\n") {
            let f = line.split(separator: " ")
            guard f.count == 3, let ns = UInt64(f[1]), let value = UInt64(f[2]) else { continue }
            out[String(f[0]), default: []].append((ns, value))
        }
        return out
    }

    @Test("a traced run marks every stage from journal to ack, with the seqs, in order, and never the text")
    func tracedRun() throws {
        let pair = Pair()
        defer { pair.stop() }
        let trace = pair.desktopHome + "/trace.txt"
        let fifo = pair.desktopHome + "/out"
        try pair.startDaemon(sinks: ["fifo:" + fifo], env: ["SPEAKBRIDGE_TRACE": trace])
        let reader = FifoReader(path: fifo)
        reader.start()
        defer { reader.stop() }
        try pair.join()
        let send = try Proc(["send", "--text", "alpha secret", "--text", "beta secret"], home: pair.phoneHome,
                            env: ["SPEAKBRIDGE_TRACE": trace], label: "send")
        let out = try send.wait(timeout: 30)
        #expect(out.status == 0, "\(out.stderr)")
        try Harness.wait("both lines on the FIFO") { reader.lines.count >= 2 }

        let text = try String(contentsOfFile: trace, encoding: .utf8)
        #expect(!text.contains("secret"), "the trace holds no text of a line")
        let marks = Self.marks(text)
        for stage in ["journal", "encrypt", "recv", "ledger", "progress", "sink", "fsync", "ack", "ackrecv"] {
            #expect(marks[stage]?.isEmpty == false, "no \(stage) mark in \(text)")
        }
        // Both lines went in one journal append (seq 1 and 2): every seq-carrying stage reaches seq 2.
        for stage in ["journal", "ledger", "progress", "sink", "fsync", "ack"] {
            #expect(marks[stage]?.map(\.1).max() == 2, "\(stage): \(String(describing: marks[stage]))")
        }
        // One clock for both processes: the line's way is in order.
        let first = { (stage: String) -> UInt64 in marks[stage]?.map(\.0).min() ?? 0 }
        let order = ["journal", "ledger", "progress", "sink", "fsync", "ack"]
        for (a, b) in zip(order, order.dropFirst()) {
            #expect(first(a) <= first(b), "\(a) after \(b)")
        }
        var st = stat()
        #expect(lstat(trace, &st) == 0 && st.st_mode & 0o777 == 0o600)
    }

    @Test("a one-shot send that ends as soon as the desktop closes still said bye: counted as a normal close")
    func oneShotSaysBye() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (_, reader) = try pair.startWithFIFO()
        defer { reader.stop() }
        let out = try pair.send(["one shot"])
        #expect(out.status == 0, "\(out.stderr)")
        try Harness.wait("the line on the FIFO") { reader.lines.count >= 1 }
        try Harness.wait("the bye counted") {
            let status = (try? run(["status", "--json"], home: pair.desktopHome).stdout) ?? ""
            return status.range(of: #""closedNormally"\s*:\s*1\b"#, options: .regularExpression) != nil
        }
    }
}
