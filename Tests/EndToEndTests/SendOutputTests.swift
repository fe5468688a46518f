#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing

/// `send` never goes quiet, gives up when it should (timeout rule, revoked device), and the outbox can be listed,
/// released and cleared; a new pairing holds the old pairing's lines. All against the real binary and daemon.
@Suite("send output and outbox", .serialized)
struct SendOutputTests {
    static let hasScript = PseudoTerminal.isAvailable

    /// Runs `command` on a pseudo-terminal with script(1), feeding `input` as typed; returns (exit status, what
    /// appeared on the terminal).
    func onTerminal(_ command: String, home: String, input: String = "", timeout: Double = 20) throws -> (Int32, String) {
        let typescript = home + "/typescript-\(UInt32.random(in: 0...UInt32.max))"
        let (script, stdin) = try PseudoTerminal.start(command, typescript: typescript)
        if !input.isEmpty {
            usleep(300_000)  // let the command reach its prompt
            // script may have exited already (the command failed): EPIPE, not a SIGPIPE that ends the test process.
            signal(SIGPIPE, SIG_IGN)
            try? stdin.fileHandleForWriting.write(contentsOf: Data(input.utf8))
        }
        try Harness.wait("script to exit", timeout: timeout) { !script.isRunning }
        let shown = (try? String(contentsOfFile: typescript, encoding: .utf8)) ?? ""
        return (script.terminationStatus, shown)
    }

    func q(_ s: String) -> String { "'" + s + "'" }

    /// `run`, but a command still running at the timeout is killed (a `send` that never gives up is the bug).
    func runOrKill(_ args: [String], home: String, timeout: Double = 15) throws -> Outcome {
        let p = try Proc(args, home: home, label: "cmd-\(UInt32.random(in: 0...UInt32.max))")
        defer { p.terminate() }
        return try p.wait(timeout: timeout)
    }

    func statusJSON(_ pair: Pair) throws -> JSONValue {
        let out = try run(["status", "--json"], home: pair.desktopHome).stdout
        return try JSONValue.parse(Array(out.utf8), maxDepth: 8, maxBytes: 1 << 20)
    }

    func revokeOnlyDevice(_ pair: Pair) throws {
        let devices = try run(["devices", "--json"], home: pair.desktopHome).stdout
        let id = try #require(devices.range(of: #"[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}"#, options: .regularExpression))
        #expect(try run(["devices", "revoke", String(devices[id])], home: pair.desktopHome).status == 0)
    }

    @Test("a revoked device: send exits 77 at once with a clear error and a hint that promises no delivery")
    func revokedExitsAtOnce() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        #expect(try pair.send(["before"]).status == 0)
        try revokeOnlyDevice(pair)
        // No --timeout: the old code kept retrying forever here.
        let out = try runOrKill(["send", "--text", "after revoke"], home: pair.phoneHome)
        #expect(out.status == 77, "\(out.stderr)")
        #expect(out.stderr.contains("speakbridge: error: the desktop \"") && out.stderr.contains("refused this device (revoked?)"))
        #expect(out.stderr.contains(" at 127.0.0.1:\(pair.port) refused this device"), "names the address: \(out.stderr)")
        #expect(out.stderr.contains("speakbridge: hint: pair again with `speakbridge join CODE`"))
        #expect(!out.stderr.contains("go out with the next"), "a revoked device's lines are not promised: \(out.stderr)")
        // Counted as rejected handshakes, not as normal closes; the normal send counted as a normal close.
        let status = try statusJSON(pair)
        #expect(status["closedNormally"]?.int64Value == 1)
        #expect((status["rejected"]?.int64Value ?? 0) >= 1)
        #expect(status["pairingFailures"]?.int64Value == 0)
    }

    @Test("status --json: five normal sends are five normal closes, not rejections; status names the device")
    func countersMeanWhatTheySay() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join(name: "pixel")
        for i in 0..<5 { #expect(try pair.send(["line \(i)"]).status == 0) }
        let status = try statusJSON(pair)
        #expect(status["rejected"]?.int64Value == 0, "normal byes counted as rejections: \(status)")
        #expect(status["closedNormally"]?.int64Value == 5)
        #expect(status["sessions"]?.arrayValue?.first?["name"]?.stringValue == "pixel")
        let text = try run(["status"], home: pair.desktopHome).stdout
        #expect(text.contains("of \"pixel\" ("), "sessions by device name: \(text)")
        // A pairing attempt with a wrong secret is one pairing failure, not also a rejection.
        var code = try PairingCode.parse(try pair.pairCode())
        code.secret = SecureRandom.bytes(32)
        let other = Harness.tempDir("guess")
        defer { try? FileManager.default.removeItem(atPath: other) }
        #expect(try run(["join", code.encoded(), "--name", "guess"], home: other).status != 0)
        let after = try statusJSON(pair)
        #expect(after["pairingFailures"]?.int64Value == 1, "\(after)")
        #expect(after["rejected"]?.int64Value == 0, "a failed pairing counted twice: \(after)")
    }

    @Test("two devices named vm: revoke vm lists both (ID, name, last seen) and asks for the ID; revokes nothing")
    func ambiguousRevoke() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join(name: "vm")
        let second = Harness.tempDir("phone2")
        defer { try? FileManager.default.removeItem(atPath: second) }
        #expect(try run(["join", try pair.pairCode(), "--name", "vm"], home: second).status == 0)
        for daemonRuns in [true, false] {
            if !daemonRuns { pair.daemon?.terminate() }
            let out = try run(["devices", "revoke", "vm"], home: pair.desktopHome)
            #expect(out.status != 0)
            #expect(out.stderr.contains("2 paired devices match \"vm\""), "daemon: \(daemonRuns): \(out.stderr)")
            #expect(out.stderr.contains("by its ID"))
            let ids = out.stderr.matches(of: /[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}/).count
            #expect(ids == 2, "both matches listed: \(out.stderr)")
            #expect(out.stderr.contains("last seen"))
            let list = try run(["devices", "--json"], home: pair.desktopHome).stdout
            #expect(list.components(separatedBy: "\"vm\"").count - 1 == 2, "nothing revoked: \(list)")
        }
    }

    @Test("desktop down, stdin an open pipe: plain 'still waiting' lines, no escape; the default timeout starts at EOF")
    func neverQuietOffATerminal() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        pair.daemon?.terminate()
        let (sender, writer) = try pair.pipedSend(["--still-waiting-interval", "0.5", "--default-timeout", "1"],
                                                  label: "quiet")
        try writer.write(contentsOf: Data("queued line\n".utf8))
        try Harness.wait("two still-waiting lines") {
            sender.stderr.components(separatedBy: "still waiting for the desktop").count > 2 || !sender.process.isRunning
        }
        usleep(300_000)
        #expect(sender.process.isRunning, "an open pipe keeps waiting past the default timeout: \(sender.stderr)")
        #expect(sender.stderr.contains("1 line(s) queued"))
        #expect(!sender.stderr.contains("\u{1B}"), "an escape sequence went into a log")
        try writer.close()
        let outcome = try sender.wait(timeout: 15)
        #expect(outcome.status == 75, "\(outcome.stderr)")
        #expect(outcome.stderr.contains("go out with the next `speakbridge send`"))
    }

    @Test("--text with the desktop down gives up after the default timeout (exit 75), lines kept in the outbox")
    func textHasAFiniteDefault() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        pair.daemon?.terminate()
        let out = try run(["send", "--text", "later", "--default-timeout", "1"], home: pair.phoneHome, timeout: 15)
        #expect(out.status == 75, "\(out.stderr)")
        let box = try run(["outbox"], home: pair.phoneHome)
        #expect(box.stdout.contains("1 line(s) queued") && box.stdout.contains("oldest \"later\""), "\(box.stdout)")
    }

    @Test("on a terminal: one status line rewritten in place (queued / delivered / waiting, why)",
          .enabled(if: SendOutputTests.hasScript))
    func statusLineOnATerminal() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        pair.daemon?.terminate()
        let command = "\(q(Harness.binary)) send --text one --timeout 1 --home \(q(pair.phoneHome))"
        let (status, shown) = try onTerminal(command, home: pair.phoneHome)
        #expect(status == 75 || shown.contains("COMMAND_EXIT_CODE=\"75\""), "\(shown)")
        #expect(shown.contains("\r\u{1B}[Kspeakbridge: \"") && shown.contains("queued 1 / delivered 0 / waiting for"),
                "no live status line: \(shown)")
        #expect(shown.contains("\r\u{1B}[Kspeakbridge: error: 1 chunk(s) not acknowledged"), "the line is erased before the error")
    }

    @Test("after pairing again, old queued lines are held; release sends them after the new ones; clear asks")
    func heldAfterNewPairing() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        try revokeOnlyDevice(pair)
        #expect(try runOrKill(["send", "--text", "old one", "--text", "old two"], home: pair.phoneHome).status == 77)
        try pair.join()
        let listed = try run(["outbox"], home: pair.phoneHome)
        #expect(listed.stdout.contains("2 line(s) held from an earlier pairing"), "\(listed.stdout) \(listed.stderr)")
        #expect(try pair.send(["new"]).status == 0)
        usleep(300_000)
        #expect(pair.daemon!.stdout == "new\n", "old lines went out without being released: \(pair.daemon!.stdout)")
        // Clear refuses to drop anything without --yes when stdin is not a terminal.
        let refused = try run(["outbox", "clear", "--held"], home: pair.phoneHome)
        #expect(refused.status != 0 && refused.stderr.contains("add --yes"))
        #expect(try run(["outbox", "release"], home: pair.phoneHome).status == 0)
        #expect(try run(["send"], home: pair.phoneHome, timeout: 15).status == 0)
        try Harness.wait("the released lines") { pair.daemon!.stdout.components(separatedBy: "\n").count >= 4 }
        #expect(pair.daemon!.stdout == "new\nold one\nold two\n")
        #expect(try run(["outbox"], home: pair.phoneHome).stderr.contains("the outbox is empty"))
    }

    @Test("outbox clear: asks on a terminal (n keeps, y drops), --yes drops without asking",
          .enabled(if: SendOutputTests.hasScript))
    func clearAsksOnATerminal() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        pair.daemon?.terminate()
        #expect(try run(["send", "--text", "a\u{1B}[31mred", "--timeout", "0.5"], home: pair.phoneHome).status == 75)
        let listed = try run(["outbox"], home: pair.phoneHome).stdout
        #expect(!listed.contains("\u{1B}"), "the preview is sanitized: \(listed)")
        let command = "\(q(Harness.binary)) outbox clear --home \(q(pair.phoneHome))"
        let (_, kept) = try onTerminal(command, home: pair.phoneHome, input: "n\n")
        #expect(kept.contains("[y/N]"), "\(kept)")
        #expect(try run(["outbox"], home: pair.phoneHome).stdout.contains("1 line(s) queued"))
        let (_, dropped) = try onTerminal(command, home: pair.phoneHome, input: "y\n")
        #expect(dropped.contains("dropped 1 line(s)"), "\(dropped)")
        #expect(try run(["send", "--text", "b", "--timeout", "0.5"], home: pair.phoneHome).status == 75)
        #expect(try run(["outbox", "clear", "--yes"], home: pair.phoneHome).status == 0)
        #expect(try run(["outbox"], home: pair.phoneHome).stderr.contains("the outbox is empty"))
    }
}
