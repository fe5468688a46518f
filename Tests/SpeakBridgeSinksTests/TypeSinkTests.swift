import Glibc
import Testing
import SpeakBridgeSinks

@Suite struct TypeSinkRuleTests {
    @Test func newlinesBecomeSpacesAndTextsAreSeparatedByOneSpace() {
        #expect(TypeSink.keystrokes(for: "hello\nworld", pressEnter: false, continuing: false) == "hello world")
        #expect(TypeSink.keystrokes(for: "next\r\nline", pressEnter: false, continuing: true) == " next line")
        #expect(TypeSink.keystrokes(for: "a\tb", pressEnter: false, continuing: false) == "a b")
        #expect(TypeSink.keystrokes(for: "", pressEnter: false, continuing: true) == "")
        #expect(!TypeSink.keystrokes(for: "no\nenter\r", pressEnter: false, continuing: true).contains("\n"))
    }

    @Test func enterOnlyWhenAsked() {
        #expect(TypeSink.keystrokes(for: "send this", pressEnter: true, continuing: true) == "send this\n")
        #expect(TypeSink.keystrokes(for: "two\nlines", pressEnter: true, continuing: false) == "two\nlines\n")
        #expect(TypeSink.keystrokes(for: "", pressEnter: true, continuing: true) == "")
    }

    @Test func alwaysSanitized() {
        // ESC : is itself a (private) escape sequence, so the colon goes with it.
        #expect(TypeSink.keystrokes(for: "\u{1B}:q!\u{1B}[Ahi", pressEnter: false, continuing: false) == "q!hi")
        #expect(TypeSink.keystrokes(for: "\u{1B}\u{1B}[2J:wq", pressEnter: false, continuing: false) == ":wq")
        #expect(TypeSink.keystrokes(for: "x\u{08}y", pressEnter: false, continuing: false) == "x\u{FFFD}y")
    }

    @Test func toolArgumentsEndOptionsBeforeTheText() {
        #expect(TypeBackend.xdotool.arguments(typing: "-rf") == ["type", "--clearmodifiers", "--delay", "0", "--", "-rf"])
        #expect(TypeBackend.wtype.arguments(typing: "-x") == ["--", "-x"])
        #expect(TypeBackend.ydotool.arguments(typing: "-x") == ["type", "--", "-x"])
    }

    @Test func backendChoiceAndMissingTools() throws {
        let empty = TemporaryDirectory()
        defer { empty.remove() }
        do {
            _ = try TypeBackend.choose(environment: ["DISPLAY": ":5", "PATH": empty.path])
            Issue.record("chose a typing tool from an empty PATH")
        } catch {
            #expect(error.hint == "install the Debian package xdotool")
        }
        do {
            _ = try TypeBackend.choose(environment: ["WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":5", "PATH": empty.path])
            Issue.record("chose a typing tool from an empty PATH")
        } catch {
            #expect(error.hint?.contains("wtype") == true)
        }
        do {
            _ = try SinkFactory.make(.type(pressEnter: false), sanitize: true, environment: ["PATH": "/usr/bin"])
            Issue.record("made a type sink without a display")
        } catch {
            #expect(error.message.contains("DISPLAY"))
        }
        if systemTool("xdotool") != nil {
            #expect(try TypeBackend.choose(environment: ["DISPLAY": ":5", "PATH": "/usr/bin"]) == .xdotool)
        }
    }
}

@Suite(.serialized, .enabled(if: XvfbServer.executable != nil && systemTool("xdotool") != nil,
                             "Xvfb or xdotool is not installed"))
struct TypeSinkXvfbTests {
    /// What was typed cannot easily be read back from a bare X server; this proves the real invocation works
    /// (xdotool exits 0 for each text, including non-ASCII and a leading dash) and progress is per text.
    @Test func typesIntoARealXServer() throws {
        let server = try XvfbServer()
        defer { server.stop() }
        let sink = try SinkFactory.make(.type(pressEnter: false), sanitize: true, environment: server.environment)
        #expect(sink.label == "type")
        var progress: [Int] = []
        try sink.deliver(["hello world", "-rf is not an option", "", "ünïcödé ✓"]) { progress.append($0) }
        #expect(progress == [1, 2, 3, 4])
    }

    @Test func failingToolIsASinkErrorWithTheTextsDoneSoFar() throws {
        // A display no server has: not a stopped test server's number, which another test running in parallel
        // may be handed by `Xvfb -displayfd` a moment later (seen: xdotool then typed into that server).
        var environment = ["PATH": "/usr/bin:/bin"]
        environment["DISPLAY"] = ":\(unusedDisplayNumber())"
        let sink = try TypeSink(backend: .xdotool, pressEnter: false, environment: environment)
        do {
            try sink.deliver(["never typed"]) { _ in }
            Issue.record("xdotool succeeded without an X server")
        } catch {
            #expect(error.delivered == 0)
            #expect(error.message.hasPrefix("xdotool"))
        }
    }
}

/// A display number with no X server socket, far above the ones Xvfb -displayfd hands out (it starts at 0).
func unusedDisplayNumber() -> Int {
    var number = 20_000 + Int(getpid() % 10_000)
    while access("/tmp/.X11-unix/X\(number)", F_OK) == 0 { number += 1 }
    return number
}
