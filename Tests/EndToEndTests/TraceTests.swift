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
        let (_, reader) = try pair.startWithFIFO(env: ["SPEAKBRIDGE_TRACE": trace])
        defer { reader.stop() }
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

    /// Sets every peer's "last seen" in `home`'s peers.json to 2001, in place (the file keeps its owner and 0600).
    static func ageLastSeen(_ home: String) throws {
        let path = home + "/state/peers.json"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let aged = text.replacingOccurrences(of: #""lastSeen":\d+"#, with: #""lastSeen":1000000000"#,
                                             options: .regularExpression)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data(aged.utf8))
        try handle.close()
    }

    @Test("\"last seen\" that is due is written after a stream's first line is through, on both sides, and written")
    func lastSeenAfterTheFirstLine() throws {
        let pair = Pair()
        defer { pair.stop() }
        let trace = pair.desktopHome + "/trace.txt"
        let (fifo, reader) = try pair.startWithFIFO()
        defer { reader.stop() }
        // A minute later, as far as both peers.json files say: both sides have "last seen" to write. The daemon
        // reads its file at start.
        pair.daemon?.terminate()
        try Self.ageLastSeen(pair.desktopHome)
        try Self.ageLastSeen(pair.phoneHome)
        try pair.startDaemon(sinks: ["fifo:" + fifo], env: ["SPEAKBRIDGE_TRACE": trace])

        signal(SIGPIPE, SIG_IGN)
        let pipe = Pipe()
        let send = try Proc(["send"], home: pair.phoneHome, stdin: pipe.fileHandleForReading,
                            env: ["SPEAKBRIDGE_TRACE": trace], label: "stream")
        defer { send.terminate() }
        try pipe.fileHandleForWriting.write(contentsOf: Data("first\n".utf8))
        try Harness.wait("the first line on the FIFO") { reader.snapshot == ["first"] }
        let read = { Self.marks((try? String(contentsOfFile: trace, encoding: .utf8)) ?? "") }
        try Harness.wait("the sender's and the desktop's last-seen writes") {
            read()["remember"] != nil && read()["seen"] != nil
        }
        try pipe.fileHandleForWriting.close()
        #expect(try send.wait(timeout: 30).status == 0)

        let marks = read()
        let firstSink = try #require(marks["sink"]?.map(\.0).min())
        let remember = try #require(marks["remember"])
        let seen = try #require(marks["seen"])
        #expect(remember.count == 1 && seen.count == 1, "one write each: \(remember) \(seen)")
        // The sender hands its write over at the first ack, which comes after the line's sink write and fsync;
        // the desktop writes a second after the handshake. Before, both started at the handshake.
        #expect(remember[0].0 > firstSink, "the sender's write began before the first line was through")
        #expect(seen[0].0 > firstSink, "the desktop's write began before the first line was through")
        // And both were written: neither file still says 2001.
        for home in [pair.phoneHome, pair.desktopHome] {
            try Harness.wait("\(home)'s last seen written") {
                let text = (try? String(contentsOfFile: home + "/state/peers.json", encoding: .utf8)) ?? ""
                return text.contains(#""lastSeen":"#) && !text.contains(#""lastSeen":1000000000"#)
            }
        }
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
