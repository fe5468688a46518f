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

    @Test func backendChoiceAndMissingTools() throws {
        let empty = TemporaryDirectory()
        defer { empty.remove() }
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
        // X11 types in-process (XTEST through libX11/libXtst): no tool in PATH needed.
        #expect(try TypeBackend.choose(environment: ["DISPLAY": ":5", "PATH": empty.path]) == .x11)
        let sink = try TypeSink(backend: .x11, pressEnter: false, environment: ["DISPLAY": ":5"])
        #expect(sink.method.hasPrefix("XTEST on X11 :5"))
        if systemTool("wtype") != nil {
            #expect(try TypeBackend.choose(environment: ["WAYLAND_DISPLAY": "w", "DISPLAY": ":5", "PATH": "/usr/bin"]) == .wtype)
        }
    }

    /// Start-up probe: a display nobody serves stops `serve` with the display named, before any chunk.
    @Test func probeOfADeadDisplayNamesIt() throws {
        let display = ":\(unusedDisplayNumber())"
        let sink = try TypeSink(backend: .x11, pressEnter: false, environment: ["DISPLAY": display])
        do {
            try sink.probe()
            Issue.record("probe succeeded without an X server")
        } catch {
            #expect(error.message == "cannot open display \(display)")
            #expect(error.hint?.contains("XAUTHORITY") == true)
        }
        do {
            try sink.deliver(["never typed"]) { _ in }
            Issue.record("typed without an X server")
        } catch {
            #expect(error.delivered == 0)
            #expect(error.message == "cannot open display \(display)")
        }
    }
}

/// A display number with no X server socket, far above the ones Xvfb -displayfd hands out (it starts at 0).
func unusedDisplayNumber() -> Int {
    var number = 20_000 + Int(getpid() % 10_000)
    while access("/tmp/.X11-unix/X\(number)", F_OK) == 0 { number += 1 }
    return number
}
