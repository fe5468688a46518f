import Foundation
import SpeakBridgeTestSupport
import Glibc
import Testing
import SpeakBridgeSinks

@Suite struct ClipboardBackendChoiceTests {
    @Test func noDisplayNamesTheVariables() {
        do {
            _ = try ClipboardBackend.choose(environment: ["PATH": "/usr/bin:/bin"])
            Issue.record("chose a clipboard tool without a display")
        } catch {
            #expect(error.message.contains("DISPLAY") && error.message.contains("WAYLAND_DISPLAY"))
            #expect(error.hint?.contains("export DISPLAY") == true)
        }
        #expect(throws: SinkError.self) {
            _ = try SinkFactory.make(.clipboard(primary: false), sanitize: true, environment: [:])
        }
    }

    @Test func missingX11ToolNamesThePackage() {
        let empty = TemporaryDirectory()
        defer { empty.remove() }
        do {
            _ = try ClipboardBackend.choose(environment: ["DISPLAY": ":7", "PATH": empty.path])
            Issue.record("chose a clipboard tool from an empty PATH")
        } catch {
            #expect(error.hint?.contains("xclip") == true)
        }
        do {
            _ = try ClipboardSink(backend: .xsel, primary: false, environment: ["DISPLAY": ":7", "PATH": empty.path])
            Issue.record("made an xsel sink without xsel")
        } catch {
            #expect(error.message.contains("xsel not found"))
            #expect(error.hint == "install the Debian package xsel")
        }
    }

    @Test func missingWaylandToolNamesThePackage() {
        let empty = TemporaryDirectory()
        defer { empty.remove() }
        do {
            _ = try ClipboardBackend.choose(environment: ["WAYLAND_DISPLAY": "wayland-0", "PATH": empty.path])
            Issue.record("chose a clipboard tool from an empty PATH")
        } catch {
            #expect(error.hint?.contains("wl-clipboard") == true)
        }
    }

    @Test(.enabled(if: systemTool("wl-copy") != nil && systemTool("xclip") != nil && systemTool("xsel") != nil,
                   "needs wl-copy, xclip and xsel installed"))
    func prefersWaylandThenXclipThenXsel() throws {
        #expect(try ClipboardBackend.choose(environment: ["WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0", "PATH": "/usr/bin"]) == .wlCopy)
        #expect(try ClipboardBackend.choose(environment: ["DISPLAY": ":0", "PATH": "/usr/bin"]) == .xclip)
        let onlyXsel = TemporaryDirectory()
        defer { onlyXsel.remove() }
        #expect(symlink(systemTool("xsel")!, "\(onlyXsel.path)/xsel") == 0)
        #expect(try ClipboardBackend.choose(environment: ["DISPLAY": ":0", "PATH": onlyXsel.path]) == .xsel)
        // Wayland session without wl-copy but with XWayland: fall back to the X11 tool.
        #expect(try ClipboardBackend.choose(environment: ["WAYLAND_DISPLAY": "w", "DISPLAY": ":0", "PATH": onlyXsel.path]) == .xsel)
    }

    @Test func toolArguments() {
        #expect(ClipboardBackend.xclip.arguments(primary: false) == ["-selection", "clipboard", "-i"])
        #expect(ClipboardBackend.xclip.arguments(primary: true) == ["-selection", "primary", "-i"])
        #expect(ClipboardBackend.xsel.arguments(primary: false) == ["--clipboard", "--input"])
        #expect(ClipboardBackend.xsel.arguments(primary: true) == ["--primary", "--input"])
        #expect(ClipboardBackend.wlCopy.arguments(primary: false) == [])
        #expect(ClipboardBackend.wlCopy.arguments(primary: true) == ["--primary"])
    }
}

/// Real X server, real tools, read back with `xclip -o`.
@Suite(.serialized, .enabled(if: XvfbServer.executable != nil && systemTool("xclip") != nil,
                             "Xvfb or xclip is not installed"))
struct ClipboardSinkXvfbTests {
    @Test(arguments: [ClipboardBackend.xclip, .xsel])
    func setsClipboardAndPrimary(_ backend: ClipboardBackend) throws {
        guard systemTool(backend.executable) != nil else { return }  // xsel is optional on a machine
        let server = try XvfbServer()
        defer { server.stop() }
        let clipboard = try ClipboardSink(backend: backend, primary: false, environment: server.environment)
        let primary = try ClipboardSink(backend: backend, primary: true, environment: server.environment)
        #expect(clipboard.label == "clipboard" && primary.label == "clipboard:primary")
        #expect(clipboard.waitUntilReady(timeout: .seconds(1)) == nil)

        var progress: [Int] = []
        try clipboard.deliver(["first phrase.", "second: Grüße 日本 🙂"]) { progress.append($0) }
        #expect(progress == [2])
        #expect(server.selection(primary: false, expecting: "first phrase.\nsecond: Grüße 日本 🙂")
                == "first phrase.\nsecond: Grüße 日本 🙂")

        // The clipboard holds the latest dictation.
        try clipboard.deliver(["newer"]) { _ in }
        #expect(server.selection(primary: false, expecting: "newer") == "newer")

        try primary.deliver(["for the middle button"]) { _ in }
        #expect(server.selection(primary: true, expecting: "for the middle button") == "for the middle button")
        #expect(server.selection(primary: false, expecting: "newer") == "newer")

        // Sanitized by default: an OSC 52 sequence does not make it into the clipboard.
        try clipboard.deliver(["\u{1B}]52;c;ZXZpbA==\u{07}safe"]) { _ in }
        #expect(server.selection(primary: false, expecting: "safe") == "safe")
    }

    @Test func factoryMakesAWorkingClipboardSink() throws {
        let server = try XvfbServer()
        defer { server.stop() }
        let sink = try SinkFactory.make(.clipboard(primary: false), sanitize: false, environment: server.environment)
        #expect(sink.label == "clipboard")
        try sink.deliver(["raw\ttab"]) { _ in }
        #expect(server.selection(primary: false, expecting: "raw\ttab") == "raw\ttab")
    }

    @Test func unreachableDisplayIsAnErrorNamingTheToolNotTheText() throws {
        // A display nobody serves (`ChosenDisplay`: a server of this test stopped at a low number was soon replaced
        // by another suite's, and xclip reached that one).
        let environment = ["DISPLAY": ":\(ChosenDisplay.unused())", "PATH": "/usr/bin:/bin"]
        let sink = try ClipboardSink(backend: .xclip, primary: false, environment: environment)
        let clock = ContinuousClock()
        let started = clock.now
        do {
            try sink.deliver(["secret dictation"]) { _ in }
            Issue.record("xclip succeeded without an X server")
        } catch {
            #expect(error.delivered == 0)
            #expect(error.message.contains("xclip failed with exit status"))
            #expect(!error.message.contains("secret") && !(error.hint ?? "").contains("secret"))
            #expect(error.hint?.contains(environment["DISPLAY"]!) == true)
        }
        #expect(clock.now - started < .seconds(15))
    }

    /// A tool that quotes its input on stderr does not put the dictation into the error (and so into the log).
    @Test func aToolQuotingItsInputDoesNotLeakTheText() throws {
        let bin = TemporaryDirectory()
        defer { bin.remove() }
        let fake = "\(bin.path)/xclip"
        #expect(FileManager.default.createFile(atPath: fake, contents: Data("""
            #!/bin/sh
            echo "xclip: cannot take this:" >&2
            cat >&2
            echo >&2
            echo "end of input" >&2
            exit 1
            """.utf8), attributes: [.posixPermissions: 0o700]))
        let sink = try ClipboardSink(backend: .xclip, primary: false,
                                     environment: ["PATH": "\(bin.path):/usr/bin:/bin", "DISPLAY": ":1"])
        do {
            try sink.deliver(["secret dictation", "second secret\nline"]) { _ in }
            Issue.record("the fake tool succeeded")
        } catch {
            #expect(error.message
                == "xclip failed with exit status 1: xclip: cannot take this:; […]; […]; […]; end of input")
            #expect(!error.message.contains("secret") && !error.message.contains("line;"))
        }
    }

    /// What xclip said on stderr is in the sink error (and so in `status` and the daemon log).
    @Test func theToolsOwnWordsAreInTheError() throws {
        let display = ":\(unusedDisplayNumber())"
        let sink = try ClipboardSink(backend: .xclip, primary: false, environment: ["PATH": "/usr/bin:/bin", "DISPLAY": display])
        do {
            try sink.deliver(["secret dictation"]) { _ in }
            Issue.record("xclip succeeded without an X server")
        } catch {
            #expect(error.message == "xclip failed with exit status 1: xclip: Error: Can't open display: \(display)")
            #expect(!error.message.contains("secret"))
        }
    }
}
