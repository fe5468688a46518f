#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeTestSupport
import Testing

/// The real binary's stderr: plain lines when it is a file, journald priorities when JOURNAL_STREAM names it,
/// `--quiet` and `--verbose` on every subcommand.
@Suite("End to end: logging", .serialized)
struct LoggingTests {
    /// A `speakbridge` process whose stderr is a file opened here, so the test knows its device and inode
    /// before the process starts (as systemd does when it sets JOURNAL_STREAM).
    final class LoggedProc: @unchecked Sendable {
        let process = Process()
        let stderrPath: String

        init(_ args: [String], home: String, journal: Bool, journalStream: String? = nil,
             env: [String: String] = [:]) throws {
            stderrPath = home + "/log-\(UInt32.random(in: 0...UInt32.max)).err"
            let fd = open(stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            guard fd >= 0 else { throw HarnessError("cannot create \(stderrPath)") }
            var info = stat()
            fstat(fd, &info)
            var environment = ProcessInfo.processInfo.environment
            environment["SPEAKBRIDGE_HOME"] = nil
            environment["SPEAKBRIDGE_SECRETS"] = "file"
            environment["JOURNAL_STREAM"] = journal ? "\(info.st_dev):\(info.st_ino)" : journalStream
            for (key, value) in env { environment[key] = value }
            process.executableURL = URL(fileURLWithPath: Harness.binary)
            process.arguments = args + ["--home", home]
            process.environment = environment
            process.standardError = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
            process.standardOutput = FileHandle.nullDevice
            process.standardInput = FileHandle.nullDevice
            try process.run()
        }

        var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }
        var lines: [String] { stderr.split(separator: "\n").map(String.init) }

        func wait() throws -> Int32 {
            try Harness.wait("speakbridge to exit") { !process.isRunning }
            return process.terminationStatus
        }

        func stop() {
            if process.isRunning { kill(process.processIdentifier, SIGTERM) }
            try? Harness.wait("the daemon to stop", timeout: 10) { !process.isRunning }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
    }

    /// Starts `serve` and waits until its control socket answers.
    static func serve(home: String, _ extra: [String], journal: Bool, env: [String: String] = [:]) throws -> LoggedProc {
        let daemon = try LoggedProc(["serve", "--listen", "127.0.0.1:0", "--no-mdns",
                                     "--sink", "fifo:\(home)/out"] + extra, home: home, journal: journal, env: env)
        try Harness.wait("the daemon's control socket") {
            !daemon.process.isRunning || (try? run(["status", "--json"], home: home).status) == 0
        }
        guard daemon.process.isRunning else { throw HarnessError("daemon exited: \(daemon.stderr)") }
        return daemon
    }

    @Test("stderr is a file: plain error and hint lines, no escape sequence, no priority prefix")
    func plainWhenNotATerminal() throws {
        let home = Harness.tempDir("log-plain")
        defer { try? FileManager.default.removeItem(atPath: home) }
        // A JOURNAL_STREAM inherited from a parent whose stderr went to the journal does not match this file.
        let proc = try LoggedProc(["serve", "--sink", "bogus"], home: home, journal: false, journalStream: "1:2")
        #expect(try proc.wait() != 0)
        let lines = proc.lines
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.first?.hasPrefix("speakbridge: error: ") == true)
        #expect(lines.last?.hasPrefix("speakbridge: hint: valid sinks") == true)
        #expect(!proc.stderr.contains("\u{1B}") && !proc.stderr.contains("<3>"))
    }

    @Test("under systemd (JOURNAL_STREAM = stderr's dev:ino) every line carries its sd-daemon priority")
    func journalPriorities() throws {
        let home = Harness.tempDir("log-journal")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let failing = try LoggedProc(["serve", "--sink", "bogus"], home: home, journal: true)
        #expect(try failing.wait() != 0)
        #expect(failing.lines.first?.hasPrefix("<3>speakbridge: error: ") == true, "\(failing.lines)")
        #expect(failing.lines.last?.hasPrefix("<3>speakbridge: hint: ") == true)

        // --verbose: <6> info, <7> debug (a connection and a sink write), never the dictated text or the code.
        let pair = Pair()
        defer { pair.stop() }
        let daemon = try Self.serve(home: pair.desktopHome, ["--verbose"], journal: true)
        defer { daemon.stop() }
        let reader = FifoReader(path: pair.desktopHome + "/out")
        reader.start()
        defer { reader.stop() }
        let code = try pair.pairCode()
        #expect(try run(["join", code, "--name", "phone"], home: pair.phoneHome).status == 0)
        #expect(try pair.send(["dictated words"]).status == 0)
        try Harness.wait("the line on the FIFO") { reader.count >= 1 }
        try Harness.wait("the debug line of the sink write") { daemon.stderr.contains("wrote 1 text") }
        daemon.stop()
        let lines = daemon.lines
        #expect(lines.allSatisfy { $0.range(of: #"^<[3467]>speakbridge: "#, options: .regularExpression) != nil },
                "\(lines)")
        #expect(lines.contains { $0.hasPrefix("<6>speakbridge: desktop ") })
        #expect(lines.contains { $0.hasPrefix("<7>speakbridge: debug: connection ") && $0.contains(" opened from ") })
        #expect(lines.contains { $0.hasPrefix("<7>speakbridge: debug: fifo:") && $0.contains("wrote 1 text") })
        #expect(!daemon.stderr.contains("dictated words") && !daemon.stderr.contains(code)
                && !daemon.stderr.contains("\u{1B}"))
    }

    @Test("a failing clipboard tool: `status` and the daemon log carry what the tool said, never the text",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/xclip"), "xclip is not installed"))
    func toolErrorReachesStatusAndLog() throws {
        let pair = Pair()
        defer { pair.stop() }
        // An X server that goes away after the daemon started (a dead display at start stops `serve`), so xclip
        // fails at once. On a display number far above those `Xvfb -displayfd` picks for other suites: at a low one,
        // another suite's server took the number as soon as this one stopped, and xclip reached it (a flaky test).
        let xvfb = try XServer(number: ChosenDisplay.unused())
        let display = xvfb.display
        try pair.startDaemon(sinks: ["clipboard"], env: ["DISPLAY": display, "WAYLAND_DISPLAY": ""])
        xvfb.stop()
        try pair.join()
        let sender = try pair.sendLines(["secret dictation"])
        defer { sender.kill9() }
        let said = "xclip failed with exit status 1: xclip: Error: Can't open display: \(display)"
        var status = ""
        do {
            try Harness.wait("the tool's words in status") {
                status = (try? run(["status"], home: pair.desktopHome).stdout) ?? ""
                return status.contains("sink clipboard: waiting: \(said)")
            }
        } catch {
            Issue.record("\(error); the last status:\n\(status)")
            return
        }
        let log = pair.daemon!.stderr
        let warnings = log.split(separator: "\n")
            .filter { $0.hasPrefix("speakbridge: warning: sink clipboard: \(said)") }
        #expect(warnings.count == 1, "one warning per distinct failure, not one per retry: \(log)")
        #expect(!log.contains("secret dictation"))
    }

    @Test("--quiet: warnings and errors only; without --verbose no debug lines")
    func quietAndDefaultLevels() throws {
        let home = Harness.tempDir("log-quiet")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let daemon = try Self.serve(home: home, ["--quiet"], journal: false)
        daemon.stop()
        #expect(daemon.stderr.isEmpty, "\(daemon.stderr)")

        let failing = try LoggedProc(["serve", "--quiet", "--sink", "bogus"], home: home, journal: false)
        #expect(try failing.wait() != 0)
        #expect(failing.lines.count == 2 && failing.stderr.contains("speakbridge: error: "))

        let normal = try Self.serve(home: home, [], journal: false)
        normal.stop()
        #expect(normal.stderr.contains("speakbridge: desktop ") && !normal.stderr.contains("debug:"))

        // Both at once is a usage error; the flags exist on other subcommands too.
        let both = try LoggedProc(["status", "--quiet", "--verbose"], home: home, journal: false)
        #expect(try both.wait() != 0)
        #expect(both.stderr.contains("--verbose and --quiet"))
        #expect(try run(["devices", "list", "--quiet"], home: home).status == 0)
    }
}
