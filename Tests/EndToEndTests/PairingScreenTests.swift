#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeProtocol
import Testing

/// An 80×24 terminal (a private tmux server) running a command; its screen as the user sees it.
final class TerminalScreen {
    static let tmux = ["/usr/bin/tmux", "/usr/local/bin/tmux"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static let zbarimg = ["/usr/bin/zbarimg", "/usr/local/bin/zbarimg"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static var available: Bool { tmux != nil && zbarimg != nil }
    /// Tests/python/terminal_to_pgm.py: a capture with colours to a PGM image.
    static let renderer = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("python/terminal_to_pgm.py").path

    let socket: String
    let directory: String
    /// The tmux server's PID, to stop it even if `kill-server` cannot reach it.
    var serverPID: pid_t = 0

    /// Starts `command` (a shell command line) in a `columns`×`rows` window. The server ends with the command:
    /// commands here end by themselves (`exec sleep 10` after the output, or a daemon stopped by the test).
    init(_ command: String, columns: Int = 80, rows: Int = 24, directory: String) throws {
        self.directory = directory
        // Its own directory: the server must stay reachable whatever happens to the test's homes.
        socket = Harness.tempDir("tmux") + "/tmux.sock"
        let environment = "env -u SPEAKBRIDGE_HOME SPEAKBRIDGE_SECRETS=file"
        // No pipe on new-session's stdout: the tmux server it forks would keep it open, and reading it would hang.
        try Self.execute(Self.tmux!, capturing: false, ["-S", socket, "-f", "/dev/null", "new-session", "-d", "-x", "\(columns)", "-y", "\(rows)",
                       "\(environment) sh -c '\(command.replacingOccurrences(of: "'", with: "'\\''"))'"])
        serverPID = pid_t((try? Self.tmux(["-S", socket, "list-sessions", "-F", "#{pid}"]))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
    }

    /// The visible screen; `escapes` keeps colours (and trailing spaces), `joined` undoes the wrapping.
    func capture(escapes: Bool = false, joined: Bool = false, history: Bool = false) -> String {
        var arguments = ["-S", socket, "capture-pane", "-p"]
        if escapes { arguments += ["-e", "-N"] }
        if joined { arguments += ["-J"] }
        if history { arguments += ["-S", "-"] }
        return (try? Self.tmux(arguments)) ?? ""
    }

    /// What a QR decoder reads on the screen, drawn with the `theme`'s default colours.
    func decode(theme: String) throws -> String {
        let screen = directory + "/screen-\(theme).txt", image = directory + "/screen-\(theme).pgm"
        try capture(escapes: true).write(toFile: screen, atomically: true, encoding: .utf8)
        _ = try Self.execute("/usr/bin/env", ["python3", Self.renderer, screen, image, theme])
        var decoded = try Self.execute(Self.zbarimg!, ["--raw", "-q", image])
        if decoded.hasSuffix("\n") { decoded.removeLast() }
        return decoded
    }

    func stop() {
        _ = try? Self.execute(Self.tmux!, capturing: false, ["-S", socket, "kill-server"])
        if serverPID > 1 { kill(serverPID, SIGTERM) }
        unlink(socket)
        rmdir(String(socket.dropLast("/tmux.sock".count)))
    }

    @discardableResult
    static func tmux(_ arguments: [String]) throws -> String { try execute(tmux!, arguments) }

    /// Runs a program and returns its stdout (through a file). posix_spawn and waitpid, not Process: Foundation's
    /// Process waits for every process that inherited its bookkeeping descriptor, and the tmux server forked by
    /// `new-session` lives on.
    @discardableResult
    static func execute(_ path: String, capturing: Bool = true, _ arguments: [String]) throws -> String {
        let output = "/tmp/sbt-exec-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { unlink(output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, capturing ? output : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard spawned == 0 else { throw HarnessError("cannot run \(path): error \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return capturing ? ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "") : ""
    }
}

/// Issue 12: the pairing screen of `serve` and of `pair` fits an 80×24 terminal, and a phone (zbarimg) reads
/// the code off what that terminal shows.
@Suite(.serialized, .enabled(if: TerminalScreen.available, "tmux and zbarimg (zbar-tools) are needed"))
struct PairingScreenTests {
    /// The code as printed (wrapping undone), and how often it was printed over the whole session.
    static func printedCode(_ screen: TerminalScreen) -> (code: String?, times: Int) {
        let all = screen.capture(joined: true, history: true)
        let lines = all.split(separator: "\n").filter { $0.hasPrefix("SB1:") }
        return (lines.last.map(String.init), all.components(separatedBy: "SB1:").count - 1)
    }

    static func checkScreen(_ screen: TerminalScreen) throws {
        let visible = screen.capture().split(separator: "\n", omittingEmptySubsequences: false)
        let (code, times) = Self.printedCode(screen)
        let code0 = try #require(code, "no code on the screen: \(visible.joined(separator: "\n"))")
        #expect(times == 1, "the code is printed once")
        #expect(try PairingCode.parse(code0).addresses.count == 1)
        for theme in ["dark", "light"] {
            #expect(try screen.decode(theme: theme) == code0,
                    "\(theme) theme: the QR on the 80×24 screen does not decode:\n\(visible.joined(separator: "\n"))")
        }
    }

    @Test("serve's first screen at 80×24 holds the whole QR, which decodes to the code")
    func serveFirstScreen() throws {
        let home = Harness.tempDir("screen-serve")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let screen = try TerminalScreen("exec '\(Harness.binary)' serve --listen 127.0.0.1:0 --no-mdns --home '\(home)'",
                                        directory: home)
        defer {
            if let status = try? run(["status", "--json"], home: home).stdout,
               let pid = (try? JSONValue.parse(Array(status.utf8), maxDepth: 8, maxBytes: 1 << 20))?["pid"]?.int64Value {
                kill(pid_t(pid), SIGTERM)
            }
            screen.stop()
        }
        try Harness.wait("the pairing screen") { screen.capture().contains("single use") }
        try Self.checkScreen(screen)
    }

    @Test("pair at 80×24, between the command line and the next prompt, decodes to the code")
    func pairScreen() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        let command = "printf '$ speakbridge pair\\n'; '\(Harness.binary)' pair --home '\(pair.desktopHome)'; "
            + "printf '$ '; exec sleep 10"
        let screen = try TerminalScreen(command, directory: pair.desktopHome)
        defer { screen.stop() }
        try Harness.wait("the pairing screen and the prompt") { screen.capture().hasSuffix("$\n") }
        try Self.checkScreen(screen)
    }

    @Test("in a terminal too small for the QR, pair prints the code and how to get a QR")
    func tooSmall() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        let command = "'\(Harness.binary)' pair --home '\(pair.desktopHome)'; printf 'done'; exec sleep 10"
        let screen = try TerminalScreen(command, columns: 60, rows: 20, directory: pair.desktopHome)
        defer { screen.stop() }
        try Harness.wait("pair's output") { screen.capture().contains("done") }
        let all = screen.capture(joined: true, history: true)
        #expect(!all.contains("█") && !all.contains("▀") && !all.contains("▄"), "a QR was drawn: \(all)")
        let (code, times) = Self.printedCode(screen)
        #expect(code.map { (try? PairingCode.parse($0)) != nil } == true && times == 1, "\(all)")
        #expect(all.contains("the QR is not shown: with this code it needs a 41×26 terminal, this one is 60×20"),
                "\(all)")
        #expect(all.contains("speakbridge: hint: enlarge the window or zoom out"), "\(all)")
    }
}
