#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

/// Focus safety end to end (the last-mile issue, items 3 and 4): a session types only into the window it started
/// in; when the focus moves, its text is held, the phone is told (`held`, printed by `send`), `status` says why,
/// and `speakbridge type --here` sends it to the window focused now.
@Suite("End to end: typing held while the focus is elsewhere", .serialized,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/Xvfb")
                && FileManager.default.isExecutableFile(atPath: "/usr/bin/xterm")
                && FileManager.default.isExecutableFile(atPath: "/usr/bin/xdotool"),
                "Xvfb, xterm or xdotool is not installed (make test installs them)"))
struct FocusHoldTests {
    /// Xvfb with two recording xterms (`first` focused), and a pair whose daemon types there, the phone joined;
    /// `body` gets the server, the xterms' directory, the two windows and the pair. All of it stops afterwards.
    static func withTwoWindows(_ first: String, _ second: String,
                               _ body: (XServer, String, String, String, Pair) throws -> Void) throws {
        let x = try XServer()
        defer { x.stop() }
        let dir = Harness.tempDir("focus")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (one, oneID) = try RecordingXterm.start(first, dir: dir, display: x.display)
        defer { kill(one.processIdentifier, SIGKILL); one.waitUntilExit() }
        let (two, twoID) = try RecordingXterm.start(second, dir: dir, display: x.display)
        defer { kill(two.processIdentifier, SIGKILL); two.waitUntilExit() }
        try RecordingXterm.focus(oneID, display: x.display)
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["type"], env: ["DISPLAY": x.display, "WAYLAND_DISPLAY": ""])
        try pair.join()
        try body(x, dir, oneID, twoID, pair)
    }

    @Test("focus moves away: the line is held, send prints the kind of hold (no window title), status says why; type --here types it in the new window")
    func heldUntilTypeHere() throws {
        try Self.withTwoWindows("mailSecretA", "bankSecretB") { x, dir, editorID, otherID, pair in
            let (send, writer) = try pair.pipedSend()
            defer { send.kill9() }
            try writer.write(contentsOf: Data("first\n".utf8))
            try Harness.wait("the first line in the editor") { RecordingXterm.typed("mailSecretA", dir) == "first" }

            try RecordingXterm.focus(otherID, display: x.display)
            try writer.write(contentsOf: Data("second\n".utf8))
            try writer.close()
            try Harness.wait("send to print the desktop's held notice") { send.stderr.contains("desktop holds line 2 at type") }
            #expect(send.stderr.contains("the focus moved away from the window this session types into"), "\(send.stderr)")
            // The device learns the kind of hold, never the desktop's window titles (HeldReason); the desktop's own
            // status names them.
            #expect(!send.stderr.contains("SecretA") && !send.stderr.contains("SecretB"), "\(send.stderr)")
            let status = try run(["status"], home: pair.desktopHome).stdout
            #expect(status.contains("focus moved from window \"mailSecretA\" to \"bankSecretB\""), "\(status)")
            #expect(RecordingXterm.typed("bankSecretB", dir).isEmpty, "typed into the window the session did not start in")
            #expect(send.process.isRunning, "send gave up on a held line")

            let here = try run(["type", "--here"], home: pair.desktopHome)
            #expect(here.status == 0, "\(here.stderr)")
            try Harness.wait("the held line in the window focused now") {
                RecordingXterm.typed("bankSecretB", dir).trimmingCharacters(in: .whitespaces) == "second"
            }
            #expect(try send.wait(timeout: 30).status == 0)
            #expect(RecordingXterm.typed("mailSecretA", dir) == "first")
        }
    }

    /// A device whose text is held because its window lost the focus must not hold another device's text: the
    /// other device's new session types into the window focused now, while the held line stays held (nothing of it
    /// typed anywhere) until the focus returns.
    @Test("one device held by a focus change: another device's text is typed meanwhile")
    func aHeldDeviceDoesNotHoldAnotherDevice() throws {
        try Self.withTwoWindows("editor", "other") { x, dir, editorID, otherID, pair in
            let tablet = Harness.tempDir("tablet")
            defer { try? FileManager.default.removeItem(atPath: tablet) }
            let joined = try run(["join", try pair.pairCode(), "--name", "tablet"], home: tablet)
            #expect(joined.status == 0, "\(joined.stderr)")

            let (send, writer) = try pair.pipedSend()
            defer { send.kill9() }
            try writer.write(contentsOf: Data("first\n".utf8))
            try Harness.wait("the first line in the editor") { RecordingXterm.typed("editor", dir) == "first" }
            try RecordingXterm.focus(otherID, display: x.display)
            try writer.write(contentsOf: Data("second\n".utf8))
            try Harness.wait("send to print the desktop's held notice") { send.stderr.contains("desktop holds line 2 at type") }

            // Before, the other device's text waited behind the held one until the focus returned: never, here.
            let hello = try Proc(["send", "--text", "hello"], home: tablet, label: "tablet")
            defer { hello.kill9() }
            try Harness.wait("the other device's text in the window focused now", timeout: 30) {
                RecordingXterm.typed("other", dir) == "hello"
            }
            #expect(try hello.wait(timeout: 30).status == 0, "\(hello.stderr)")
            #expect(!hello.stderr.contains("holds"), "the other device was told it is held: \(hello.stderr)")
            #expect(RecordingXterm.typed("editor", dir) == "first", "the held line was typed")

            try RecordingXterm.focus(editorID, display: x.display)
            try writer.close()
            try Harness.wait("the held line in its own window once the focus returns") {
                RecordingXterm.typed("editor", dir) == "first second"
            }
            #expect(try send.wait(timeout: 30).status == 0)
            #expect(RecordingXterm.typed("other", dir) == "hello")
        }
    }

    @Test("type --here against a daemon without a typing sink: an error and a hint")
    func typeHereWithoutTypingSink() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        let out = try run(["type", "--here"], home: pair.desktopHome)
        #expect(out.status != 0)
        #expect(out.stderr.contains("no typing sink"), "\(out.stderr)")
        #expect(out.stderr.contains("hint:"), "\(out.stderr)")
    }
}
