#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeProtocol
import Testing

/// Runs the real `speakbridge` binary in temporary homes. Everything stays on loopback.
enum Harness {
    static let binary: String = {
        if let b = ProcessInfo.processInfo.environment["SPEAKBRIDGE_BIN"] { return b }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/speakbridge").path
    }()

    static func tempDir(_ label: String) -> String {
        let path = "/tmp/sbt-\(label)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(path, 0o700)
        return path
    }

    static func wait(_ what: String, timeout: Double = 20, _ condition: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            if Date() > deadline { throw HarnessError("timed out waiting for \(what)") }
            usleep(20_000)
        }
    }
}

struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// A finished command.
struct Outcome {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// One running or finished `speakbridge` process.
final class Proc: @unchecked Sendable {
    let process = Process()
    let stdoutPath: String
    let stderrPath: String

    init(_ args: [String], home: String, stdin: FileHandle? = nil, env: [String: String] = [:], label: String) throws {
        stdoutPath = home + "/\(label).out"
        stderrPath = home + "/\(label).err"
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: Harness.binary)
        process.arguments = args + ["--home", home]
        var environment = ProcessInfo.processInfo.environment
        environment["SPEAKBRIDGE_HOME"] = nil
        // Secrets in each test home's file, never in the developer's keyring (nor a keyring test's private one).
        environment["SPEAKBRIDGE_SECRETS"] = "file"
        for (k, v) in env { environment[k] = v }
        process.environment = environment
        let output = FileHandle(forWritingAtPath: stdoutPath)
        let errors = FileHandle(forWritingAtPath: stderrPath)
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = stdin ?? FileHandle.nullDevice
        // The child has its own copies now. Ours are closed at once: Foundation's Process is never freed unless
        // someone calls waitUntilExit (its run-loop source retains it), and with it these two handles stayed open,
        // over 1,100 descriptors by the end of a full run. Past about 1,360 open descriptors, Foundation's
        // `Process.run` itself can crash: it copies each `/proc/self/fd` entry's 256-byte `d_name` out of readdir's
        // buffer, reading past its end (the bug `directoryEntryName` avoids in our code; seen as a SIGSEGV in
        // `Process.run` under LIBDISPATCH_COOPERATIVE_POOL_STRICT=1).
        defer {
            try? output?.close()
            try? errors?.close()
        }
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }
    var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    @discardableResult
    func wait(timeout: Double = 60) throws -> Outcome {
        do {
            try Harness.wait("process \(process.arguments?.first ?? "") to exit", timeout: timeout) { !process.isRunning }
        } catch {
            // What it said so far: the one clue to a hang in a run that cannot be repeated.
            throw HarnessError("\(error); its stderr so far: \(String(stderr.suffix(3_000)))")
        }
        return Outcome(status: process.terminationStatus, stdout: stdout, stderr: stderr)
    }

    func kill9() {
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
    }

    func terminate() {
        if process.isRunning { kill(pid, SIGTERM) }
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        kill9()
    }
}

/// Two installations on one machine: a desktop (daemon) and a phone (client).
final class Pair: @unchecked Sendable {
    let desktopHome = Harness.tempDir("desk")
    let phoneHome = Harness.tempDir("phone")
    var daemon: Proc?
    var port = 0
    var daemonRuns = 0

    /// Starts `serve` on 127.0.0.1 (port 0 the first time, then the same port) and waits for its control socket.
    func startDaemon(sinks: [String], extra: [String] = [], env: [String: String] = [:]) throws {
        daemonRuns += 1
        let listen = "127.0.0.1:\(port)"
        let p = try Proc(["serve", "--listen", listen, "--no-mdns"] + sinks.flatMap { ["--sink", $0] } + extra,
                         home: desktopHome, env: env, label: "serve\(daemonRuns)")
        daemon = p
        try Harness.wait("the daemon's control socket") {
            guard p.process.isRunning else { return true }
            return (try? run(["status", "--json"], home: desktopHome).status) == 0
        }
        guard p.process.isRunning else { throw HarnessError("daemon exited: \(p.stderr)") }
        let status = try run(["status", "--json"], home: desktopHome).stdout
        guard let range = status.range(of: #""port":(\d+)"#, options: .regularExpression),
              let value = Int(status[range].dropFirst(7)) else { throw HarnessError("no port in status: \(status)") }
        port = value
    }

    func pairCode() throws -> String {
        let out = try run(["pair", "--json"], home: desktopHome)
        guard out.status == 0, let range = out.stdout.range(of: #"SB1:[0-9A-Z]+"#, options: .regularExpression) else {
            throw HarnessError("pair failed: \(out.stderr)")
        }
        return String(out.stdout[range])
    }

    func join(name: String = "phone") throws {
        let out = try run(["join", try pairCode(), "--name", name], home: phoneHome)
        guard out.status == 0 else { throw HarnessError("join failed: \(out.stderr)") }
    }

    func send(_ texts: [String], timeout: Double = 60) throws -> Outcome {
        try run(["send"] + texts.flatMap { ["--text", $0] }, home: phoneHome, timeout: timeout)
    }

    /// Starts `send` reading the given lines from a pipe; returns the process (the pipe is closed when all is written).
    /// With `pace`, lines are written in groups of 50 with that many seconds between groups, so a test can
    /// interrupt the stream in the middle.
    func sendLines(_ lines: [String], label: String = "send", pace: Double = 0) throws -> Proc {
        // The writer may outlive a `send` the test kills: EPIPE, not a SIGPIPE that ends the test process.
        signal(SIGPIPE, SIG_IGN)
        let pipe = Pipe()
        let p = try Proc(["send"], home: phoneHome, stdin: pipe.fileHandleForReading, label: label)
        let writer = pipe.fileHandleForWriting
        let groups = pace > 0 ? stride(from: 0, to: lines.count, by: 50).map { Array(lines[$0..<min($0 + 50, lines.count)]) }
                              : [lines]
        Thread.detachNewThread {
            for group in groups {
                try? writer.write(contentsOf: Data(group.map { $0 + "\n" }.joined().utf8))
                if pace > 0 { usleep(useconds_t(pace * 1_000_000)) }
            }
            try? writer.close()
        }
        return p
    }

    /// Starts `send` (with `extra` arguments) reading a pipe the test keeps open and writes into; the writer's end
    /// is returned with the process. SIGPIPE is ignored, so a write after the `send` ended is EPIPE, not a test crash.
    func pipedSend(_ extra: [String] = [], label: String = "send") throws -> (Proc, FileHandle) {
        signal(SIGPIPE, SIG_IGN)
        let pipe = Pipe()
        let p = try Proc(["send"] + extra, home: phoneHome, stdin: pipe.fileHandleForReading, label: label)
        return (p, pipe.fileHandleForWriting)
    }

    /// Starts the daemon (with `env`) with a FIFO sink and a reader on it, and pairs the phone.
    func startWithFIFO(_ name: String = "out", env: [String: String] = [:]) throws -> (String, FifoReader) {
        let fifo = desktopHome + "/" + name
        try startDaemon(sinks: ["fifo:" + fifo], env: env)
        let reader = FifoReader(path: fifo)
        reader.start()
        try join()
        return (fifo, reader)
    }

    /// `status --json` of the running daemon, parsed.
    func status() throws -> JSONValue {
        let out = try run(["status", "--json"], home: desktopHome).stdout
        return try JSONValue.parse(Array(out.utf8), maxDepth: 8, maxBytes: 1 << 20)
    }

    func stop() {
        daemon?.terminate()
        try? FileManager.default.removeItem(atPath: desktopHome)
        try? FileManager.default.removeItem(atPath: phoneHome)
    }
}

func run(_ args: [String], home: String, stdin: FileHandle? = nil, env: [String: String] = [:],
         timeout: Double = 30) throws -> Outcome {
    let p = try Proc(args, home: home, stdin: stdin, env: env, label: "cmd-\(UInt32.random(in: 0...UInt32.max))")
    let out = try p.wait(timeout: timeout)
    try? FileManager.default.removeItem(atPath: p.stdoutPath)
    try? FileManager.default.removeItem(atPath: p.stderrPath)
    return out
}

/// Reads a FIFO from a background thread, collecting lines; can stop and reopen to act as a reader that leaves.
final class FifoReader: @unchecked Sendable {
    let path: String
    let lock = NSLock()
    var lines: [String] = []
    var partial: [UInt8] = []
    var fd: Int32 = -1
    var stopRequested = false
    var thread: Thread?

    init(path: String) { self.path = path }

    /// Opens the FIFO for reading (the daemon must have created it) and reads until `stop`.
    func start(stopAfter: Int? = nil) {
        stopRequested = false
        let t = Thread { [self] in
            // Non-blocking: a blocking open waits for a writer, and `stop` would then wait forever for a daemon
            // that never opened the FIFO. With no writer yet, poll times out and the loop checks `stopRequested`.
            let fd = open(path, O_RDONLY | O_NONBLOCK)
            guard fd >= 0 else { return }
            lock.withLock { self.fd = fd }
            var buffer = [UInt8](repeating: 0, count: 512)
            while !lock.withLock({ stopRequested }) {
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&pfd, 1, 50) > 0 else { continue }
                // Read little at a time so "stopAfter" leaves the rest in the pipe for the next reader.
                let n = read(fd, &buffer, stopAfter == nil ? buffer.count : 1)
                if n <= 0 {
                    usleep(10_000)
                    continue
                }
                lock.withLock {
                    partial += buffer[0..<n]
                    while let nl = partial.firstIndex(of: 0x0A) {
                        lines.append(String(decoding: partial[..<nl], as: UTF8.self))
                        partial.removeFirst(nl + 1)
                    }
                    if let limit = stopAfter, lines.count >= limit, partial.isEmpty { stopRequested = true }
                }
            }
            close(fd)
        }
        thread = t
        t.start()
    }

    func stop() {
        lock.withLock { stopRequested = true }
        while thread?.isFinished == false { usleep(10_000) }
    }

    var snapshot: [String] { lock.withLock { lines } }
    var count: Int { lock.withLock { lines.count } }
}
