import Foundation
import Testing

/// Issue 13 (sender CPU per line): a pipe on stdin is read on the socket thread (`sb-ws-client`), so a line's
/// frame goes out in the same loop iteration with no reader thread woken; a regular file keeps its reader thread
/// (it always polls readable). Both deliver every line, in order, and exit 0 at the end of input.
@Suite("send: stdin read on the socket thread")
struct StdinOnSocketThreadTests {
    /// The names of `pid`'s threads, from /proc.
    static func threadNames(_ pid: Int32) -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap { task in
            (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    @Test("a pipe: no sb-stdin thread; lines (and a last one without LF) delivered in order; exit 0")
    func pipeIsReadOnTheSocketThread() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (_, reader) = try pair.startWithFIFO()
        defer { reader.stop() }
        signal(SIGPIPE, SIG_IGN)
        let pipe = Pipe()
        let send = try Proc(["send"], home: pair.phoneHome, stdin: pipe.fileHandleForReading, label: "pipe-send")
        defer { send.terminate() }
        let writer = pipe.fileHandleForWriting
        try writer.write(contentsOf: Data("one\n".utf8))
        try Harness.wait("the first line on the FIFO") { reader.snapshot == ["one"] }
        let names = Self.threadNames(send.pid)
        #expect(names.contains("sb-ws-client"), "\(names)")
        #expect(!names.contains("sb-stdin"), "\(names)")
        // The watch must not change the shared open file description (a terminal left non-blocking breaks the shell).
        #expect(fcntl(pipe.fileHandleForReading.fileDescriptor, F_GETFL) & O_NONBLOCK == 0)
        // More than one read takes (64 KiB), then an unterminated last line, then the end.
        let many = (1...3_000).map { "line \($0) with a few words in it" }
        try writer.write(contentsOf: Data((many.joined(separator: "\n") + "\n" + "last").utf8))
        try writer.close()
        let outcome = try send.wait(timeout: 30)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        try Harness.wait("every line on the FIFO") { reader.snapshot.count == many.count + 2 }
        #expect(reader.snapshot == ["one"] + many + ["last"])
    }

    @Test("a regular file: read by sb-stdin, every line delivered; exit 0")
    func regularFileKeepsItsReaderThread() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (_, reader) = try pair.startWithFIFO()
        defer { reader.stop() }
        let path = pair.phoneHome + ".input"
        let lines = (1...500).map { "file line \($0)" }
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let input = try #require(FileHandle(forReadingAtPath: path))
        let send = try Proc(["send"], home: pair.phoneHome, stdin: input, label: "file-send")
        defer { send.terminate() }
        let outcome = try send.wait(timeout: 30)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        try Harness.wait("every line on the FIFO") { reader.snapshot.count == lines.count }
        #expect(reader.snapshot == lines)
    }
}
