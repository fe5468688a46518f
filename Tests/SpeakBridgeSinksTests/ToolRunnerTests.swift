import Foundation
import Glibc
import Testing
@testable import SpeakBridgeSinks

@Suite struct ToolRunnerTests {
    static let environment = ["PATH": "/usr/bin:/bin"]

    @Test func passesStdinAndClosesItSoTheToolSeesEndOfFile() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let input = Array(String(repeating: "0123456789abcdef", count: 65_536).utf8) + [0xC3, 0xA9]  // 1 MiB + é
        try ToolRunner.run("/bin/sh", ["-c", "cat > \"$0\"", "\(directory.path)/out"], input: input,
                           environment: Self.environment, timeout: .seconds(20))
        #expect(FileManager.default.contents(atPath: "\(directory.path)/out") == Data(input))
    }

    /// Query tools (swaymsg) get their stdout back, bounded; other tools' stdout is discarded.
    /// A tool starts in /, whatever the daemon's working directory: a relative name it opens (a file `-` that an
    /// older ydotool reads as its text) cannot be one another user planted where the daemon was started.
    @Test func toolsStartInTheRootDirectory() throws {
        let here = FileManager.default.currentDirectoryPath
        #expect(here != "/")
        let output = try ToolRunner.run("/bin/sh", ["-c", "pwd"], input: nil, environment: Self.environment,
                                        timeout: .seconds(10), captureStdout: 1024)
        #expect(String(decoding: output, as: UTF8.self) == "/\n")
    }

    @Test func capturesStdoutWhenAsked() throws {
        let output = try ToolRunner.run("/bin/sh", ["-c", "printf 'tree: %s' \"$0\"", "ünï"], input: nil,
                                        environment: Self.environment, timeout: .seconds(10), captureStdout: 1024)
        #expect(String(decoding: output, as: UTF8.self) == "tree: ünï")
        let cut = try ToolRunner.run("/bin/sh", ["-c", "printf 0123456789"], input: nil, environment: Self.environment,
                                     timeout: .seconds(10), captureStdout: 4)
        #expect(cut == Array("0123".utf8))
        #expect(try ToolRunner.run("/bin/sh", ["-c", "echo discarded"], input: nil, environment: Self.environment,
                                   timeout: .seconds(10)).isEmpty)
    }

    @Test func nonZeroExitAndSignalsAreFailures() {
        #expect(throws: ToolRunner.Failure(.exited(status: 3))) {
            try ToolRunner.run("/bin/sh", ["-c", "exit 3"], input: nil, environment: Self.environment, timeout: .seconds(10))
        }
        #expect(throws: ToolRunner.Failure(.signaled(signal: SIGTERM))) {
            try ToolRunner.run("/bin/sh", ["-c", "kill -TERM $$"], input: nil, environment: Self.environment, timeout: .seconds(10))
        }
        #expect(throws: ToolRunner.Failure(.spawnFailed(errno: ENOENT))) {
            try ToolRunner.run("/nonexistent/tool", [], input: nil, environment: Self.environment, timeout: .seconds(1))
        }
    }

    /// The tool's stderr is kept (its last 4 KiB, lines joined, escaped) and ends the error message, so `status`
    /// and the daemon log say why the tool failed. (Before: stderr went to /dev/null; only the exit status was told.)
    @Test func failingToolsStderrReachesTheError() {
        let script = #"echo "Error: Can't open display: :57" >&2; printf '\033[31mforged\nline\n' >&2; exit 1"#
        do {
            try ToolRunner.run("/bin/sh", ["-c", script], input: nil, environment: Self.environment, timeout: .seconds(10))
            Issue.record("the failing tool succeeded")
        } catch {
            #expect(error.reason == .exited(status: 1))
            #expect(error.stderr == #"Error: Can't open display: :57; \x1b[31mforged; line"#)
            #expect(error.message(tool: "xclip")
                == #"xclip failed with exit status 1: xclip: Error: Can't open display: :57; \x1b[31mforged; line"#)
        }
        // A tool that names itself is not named twice; one that says nothing gives the status alone.
        #expect(ToolRunner.Failure(.exited(status: 2), stderr: "xsel: Can't open display").message(tool: "xsel")
            == "xsel failed with exit status 2: xsel: Can't open display")
        #expect(ToolRunner.Failure(.timedOut).message(tool: "wtype") == "wtype did not finish in time and was stopped")
    }

    @Test func keptStderrIsBoundedToItsEnd() {
        // 1 MiB of stderr: only the end is kept.
        let script = #"head -c 1048576 /dev/zero | tr '\0' a >&2; echo >&2; echo "the last words" >&2; exit 4"#
        do {
            try ToolRunner.run("/bin/sh", ["-c", script], input: nil, environment: Self.environment, timeout: .seconds(10))
            Issue.record("the failing tool succeeded")
        } catch {
            #expect(error.reason == .exited(status: 4))
            #expect(error.stderr.hasSuffix("; the last words"))
            #expect(error.stderr.utf8.count < ToolRunner.stderrLimit + 100)
        }
    }

    /// Like a clipboard tool: the child forks a long-lived grandchild that keeps stdout open. Only the child is
    /// waited for, so this returns at once rather than when the grandchild ends.
    @Test func doesNotWaitForForkedGrandchildren() throws {
        let clock = ContinuousClock()
        let started = clock.now
        try ToolRunner.run("/bin/sh", ["-c", "sleep 30 & exit 0"], input: Array("x".utf8),
                           environment: Self.environment, timeout: .seconds(10))
        #expect(clock.now - started < .seconds(20))
    }

    @Test func timeoutKillsAndReapsTheChild() throws {
        let clock = ContinuousClock()
        let started = clock.now
        // A unique argument finds the process in /proc afterwards.
        let marker = "7\(getpid())"
        #expect(throws: ToolRunner.Failure(.timedOut)) {
            try ToolRunner.run("/bin/sleep", [marker], input: nil, environment: Self.environment, timeout: .milliseconds(200))
        }
        #expect(clock.now - started < .seconds(20))
        #expect(Self.processes(withArgument: marker).isEmpty, "the killed child is still there (zombie?)")
    }

    @Test func childGetsTheEnvironmentAndACleanSignalState() throws {
        // SIGPIPE ignored in the parent (as in the daemon) must not be inherited by the tool, and neither may the
        // calling thread's signal mask (libdispatch worker threads block nearly every signal).
        let previous = signal(SIGPIPE, SIG_IGN)
        defer { signal(SIGPIPE, previous) }
        var blocked = sigset_t(), previousMask = sigset_t()
        sigfillset(&blocked)
        pthread_sigmask(SIG_SETMASK, &blocked, &previousMask)
        defer { pthread_sigmask(SIG_SETMASK, &previousMask, nil) }
        // The probe must not be a shell: dash clears its own signal mask at startup and would hide the bug.
        try ToolRunner.run("/bin/grep", ["-q", "^SigBlk:[[:space:]]*0*$", "/proc/self/status"], input: nil,
                           environment: Self.environment, timeout: .seconds(10))
        // Signals 1...31 only: glibc reserves 32 and 33 for itself.
        let script = #"test "$SB_PROBE" = yes && "#
            + #"ign=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/self/status) && test $((0x$ign & 0x7fffffff)) -eq 0"#
        try ToolRunner.run("/bin/sh", ["-c", script], input: nil,
                           environment: Self.environment.merging(["SB_PROBE": "yes"]) { $1 }, timeout: .seconds(10))
    }

    @Test func toolsGetAUTF8LocaleAndAHome() {
        let bare = ToolRunner.toolEnvironment(["PATH": "/usr/bin"])
        #expect(bare["LC_ALL"] == "C.UTF-8")
        #expect(bare["HOME"]?.isEmpty == false)
        #expect(ToolRunner.toolEnvironment(["LANG": "de_DE.UTF-8", "HOME": "/h"]) == ["LANG": "de_DE.UTF-8", "HOME": "/h"])
        #expect(ToolRunner.toolEnvironment(["LC_CTYPE": "en_US.utf8", "HOME": "/h"])["LC_ALL"] == nil)
        #expect(ToolRunner.toolEnvironment(["LC_ALL": "C", "LANG": "en_US.UTF-8", "HOME": "/h"])["LC_ALL"] == "C.UTF-8")
    }

    @Test func findsExecutablesInTheGivenPATHOnly() {
        #expect(ToolRunner.find("sh", environment: ["PATH": "/nonexistent:/bin"]) == "/bin/sh")
        #expect(ToolRunner.find("sh", environment: ["PATH": "/nonexistent"]) == nil)
        #expect(ToolRunner.find("passwd", environment: ["PATH": "/etc"]) == nil)  // a file, not executable
    }

    /// PIDs of our child processes (any state) whose command line contains `argument`.
    static func processes(withArgument argument: String) -> [String] {
        let me = getpid()
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.filter { entry in
            guard entry.allSatisfy(\.isNumber),
                  let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 1, Int32(fields[1]) == me else { return false }
            let cmdline = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(entry)/cmdline"))) ?? Data()
            return String(decoding: cmdline, as: UTF8.self).contains(argument)
                || stat.contains("(sleep)")  // a zombie has an empty cmdline
        }
    }
}
