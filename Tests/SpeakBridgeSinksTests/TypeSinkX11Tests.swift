import Foundation
import Glibc
import Testing
@testable import SpeakBridgeSinks

/// Every character class the issue names, as separate chunks (one with a line break inside).
let everyCharacterChunks: [String] = [
    String(String.UnicodeScalarView((0x20...0x7E).map { Unicode.Scalar(UInt8($0)) })),  // all of printable ASCII
    String(String.UnicodeScalarView((0xA1...0xFF).map { Unicode.Scalar(UInt8($0)) })),  // Latin-1: ÀÄÖ…ß…äöÿ
    "Grüße Äpfel Öl ß café É",
    "emoji: 👋🎉",
    "CJK: 你好世界 日本語",
    "Hebrew: שלום, Arabic: مرحبا",
    "line one\nline two",
]

/// A new xterm on `server`, focused, and `chunks` typed into it by a fresh X11 type sink: what the xterm received
/// once it holds `expecting` (or when it gives up waiting).
func typeIntoNewXterm(_ server: XvfbServer, title: String, _ chunks: [String], pressEnter: Bool = false,
                      expecting: String) throws -> String {
    let xterm = try XtermWindow(display: server.display, title: title)
    defer { xterm.stop() }
    try xterm.focus()
    let sink = try TypeSink(backend: .x11, pressEnter: pressEnter, environment: server.environment)
    defer { sink.close() }
    try sink.deliver(chunks) { _ in }
    return xterm.received(expecting: expecting)
}

/// The type sink under a real X server, read back char for char from real xterms (see `XtermWindow`).
@Suite(.serialized, .enabled(if: XvfbServer.executable != nil && XtermWindow.executable != nil && systemTool("xdotool") != nil,
                             "Xvfb, xterm or xdotool is not installed (make test installs them)"))
struct TypeSinkX11Tests {
    /// Three runs in a row, each with a fresh sink (a fresh connection and keymap state): every character of
    /// every chunk arrives, in order, chunks separated by one space, the line break a space, no Enter.
    @Test func everyCharacterArrivesInOrderThreeRunsInARow() throws {
        let server = try XvfbServer()
        defer { server.stop() }
        let expectedOnce = everyCharacterChunks.map { $0.replacingOccurrences(of: "\n", with: " ") }.joined(separator: " ")
        for run in 1...3 {
            let xterm = try XtermWindow(display: server.display, title: "run \(run)")
            defer { xterm.stop() }
            try xterm.focus()
            let sink = try SinkFactory.make(.type(pressEnter: false), sanitize: true, environment: server.environment)
            defer { sink.close() }
            try (sink as? DescribedSink)?.probe()
            var progress: [Int] = []
            try sink.deliver(everyCharacterChunks) { progress.append($0) }
            #expect(progress == Array(1...everyCharacterChunks.count))
            let got = xterm.received(expecting: expectedOnce)
            #expect(got == expectedOnce, "run \(run): \(difference(Array(got.utf8), Array(expectedOnce.utf8)) ?? "")")
            #expect(!got.contains("\n") && !got.contains("\r"), "Enter was pressed")
        }
    }

    @Test func enterOnlyWithTypeEnter() throws {
        let server = try XvfbServer()
        defer { server.stop() }
        let expected = "first Ä\ntwo\nlines\n"
        #expect(try typeIntoNewXterm(server, title: "enter", ["first Ä", "two\nlines"], pressEnter: true,
                                     expecting: expected) == expected)
    }

    /// Caps Lock on must not change the case of what is typed (it is switched off for the text, back on after).
    @Test func capsLockDoesNotChangeTheText() throws {
        let server = try XvfbServer()
        defer { server.stop() }
        try runXdotool(["key", "Caps_Lock"], display: server.display)
        let expected = "abc ÄÖü xyz"
        #expect(try typeIntoNewXterm(server, title: "caps", ["abc ÄÖü xyz"],
                                     expecting: expected) == expected)
    }

    /// A Russian keyboard layout has no Latin letters on its first group: they go through scratch bindings, and
    /// the Cyrillic ones come from the layout itself.
    @Test(.enabled(if: systemTool("setxkbmap") != nil, "setxkbmap is not installed (make test installs x11-xkb-utils)"))
    func aNonLatinLayoutTypesLatinToo() throws {
        let server = try XvfbServer()
        defer { server.stop() }
        let layout = Process()
        layout.executableURL = URL(fileURLWithPath: systemTool("setxkbmap")!)
        layout.arguments = ["-display", server.display, "-layout", "ru"]
        try layout.run()
        layout.waitUntilExit()
        #expect(layout.terminationStatus == 0)
        let expected = "Hello, мир! Grüße ABC"
        #expect(try typeIntoNewXterm(server, title: "ru", ["Hello, мир! Grüße ABC"],
                                     expecting: expected) == expected)
    }

    /// A held Control would turn letters into shortcuts: the text is held until it is released.
    @Test func aHeldModifierHoldsTheText() throws {
        let server = try XvfbServer()
        defer { server.stop() }
        let xterm = try XtermWindow(display: server.display, title: "mods")
        defer { xterm.stop() }
        try xterm.focus()
        let sink = try TypeSink(backend: .x11, pressEnter: false, environment: server.environment)
        defer { sink.close() }
        try runXdotool(["keydown", "Control_L"], display: server.display)
        do {
            try sink.deliver(["not yet"]) { _ in }
            Issue.record("typed while Control was held")
        } catch {
            #expect(error.delivered == 0)
            #expect(error.message.contains("modifier key is held down (Control)"))
        }
        try runXdotool(["keyup", "Control_L"], display: server.display)
        try sink.deliver(["not yet"]) { _ in }
        #expect(xterm.received(expecting: "not yet") == "not yet")
    }

    /// Focus safety: a session types only into the window it started in; text is held (nothing typed anywhere)
    /// while another window has the focus, resumes when the focus returns, and `retarget()` moves it.
    @Test func focusSafety() throws {
        let server = try XvfbServer()
        defer { server.stop() }
        let editor = try XtermWindow(display: server.display, title: "editor")
        defer { editor.stop() }
        let browser = try XtermWindow(display: server.display, title: "browser")
        defer { browser.stop() }
        let sink = try TypeSink(backend: .x11, pressEnter: false, environment: server.environment)
        defer { sink.close() }

        try editor.focus()
        try sink.deliver(["first"], sessions: ["phone/1"]) { _ in }
        #expect(editor.received(expecting: "first") == "first")

        try browser.focus()
        var progress: [Int] = []
        do {
            try sink.deliver(["second", "third"], sessions: ["phone/1", "phone/1"]) { progress.append($0) }
            Issue.record("typed into a window the session did not start in")
        } catch {
            #expect(error.delivered == 0 && progress.isEmpty)
            #expect(error.message == "focus moved from window \"editor\" to \"browser\": held until focus returns or "
                                   + "`speakbridge type --here`")
        }
        // Another session starting now types into the window focused now.
        try sink.deliver(["other device"], sessions: ["laptop/7"]) { _ in }
        #expect(browser.received(expecting: "other device") == "other device")

        try editor.focus()
        try sink.deliver(["second", "third"], sessions: ["phone/1", "phone/1"]) { _ in }
        #expect(editor.received(expecting: "first second third") == "first second third")

        try browser.focus()
        #expect(try sink.retarget() == "typing goes to \"browser\" from the next text on")
        try sink.deliver(["fourth"], sessions: ["phone/1"]) { _ in }
        #expect(browser.received(expecting: "other device fourth") == "other device fourth")
        #expect(editor.received() == "first second third")
    }

    /// The focus moving while a long text is typed (here during a wait for a scratch keycode: 60 distinct CJK
    /// characters, more than the spare keycodes): typing stops there, nothing reaches the other window, and the
    /// rest — only the rest — is typed when the focus returns.
    @Test func focusMovingMidTextStopsAndResumesWhereItStopped() throws {
        try withFocusMovedMidText { editor, browser, sink, text, error in
            #expect(error.delivered == 0)
            #expect(error.message.hasPrefix("focus moved away from window \"editor\" while typing"))
            let prefix = editor.received()
            #expect(!prefix.isEmpty && prefix.count < text.count && text.hasPrefix(prefix))
            try editor.focus()
            try sink.deliver([text], sessions: ["phone/1"]) { _ in }
            #expect(editor.received(expecting: text) == text)
            #expect(browser.received() == "")
        }
    }

    /// A session held because its window lost the focus midway through a text holds only that session
    /// (`Scope.session`): another session types meanwhile, and the held text keeps how far it got, so only its
    /// rest is typed when the focus returns (once one text stopped midway was remembered for the whole sink, and
    /// the other session's text made the held one start over).
    @Test func aTextStoppedMidwayKeepsItsPlaceWhileAnotherSessionTypes() throws {
        try withFocusMovedMidText { editor, browser, sink, text, error in
            #expect(error.delivered == 0 && error.scope == .session)
            do throws(SinkError) {
                try sink.deliver([text], sessions: ["phone/1"]) { _ in }
                Issue.record("typed into a window the session did not start in")
            } catch {
                #expect(error.scope == .session, "a focus hold is the session's own: \(error.message)")
            }
            try sink.deliver(["other device"], sessions: ["laptop/7"]) { _ in }
            #expect(browser.received(expecting: "other device") == "other device")
            try editor.focus()
            try sink.deliver([text], sessions: ["phone/1"]) { _ in }
            #expect(editor.received(expecting: text) == text)
        }
    }

    /// What both focus-move tests start from: two xterms on a private Xvfb ("editor" focused, "browser"), the type
    /// sink, and 60 distinct CJK characters (more than the spare keycodes, so typing waits for scratch keycodes)
    /// typed into the editor for session "phone/1" while the focus moves to the browser 150 ms in. `body` gets the
    /// windows, the sink, the text and the error that stopped it.
    private func withFocusMovedMidText(_ body: (XtermWindow, XtermWindow, TypeSink, String, SinkError) throws -> Void)
        throws {
        let server = try XvfbServer()
        defer { server.stop() }
        let editor = try XtermWindow(display: server.display, title: "editor")
        defer { editor.stop() }
        let browser = try XtermWindow(display: server.display, title: "browser")
        defer { browser.stop() }
        let sink = try TypeSink(backend: .x11, pressEnter: false, environment: server.environment)
        defer { sink.close() }
        let text = String(String.UnicodeScalarView((0x4E00..<0x4E3C).map { Unicode.Scalar($0)! }))
        try editor.focus()
        let (browserID, display) = (browser.windowID, server.display)
        let mover = BackgroundThread<Bool> {
            sleepFor(.milliseconds(150))
            return (try? runXdotool(["windowfocus", "--sync", browserID], display: display)) != nil
        }
        do {
            try sink.deliver([text], sessions: ["phone/1"]) { _ in }
            Issue.record("the whole text was typed although the focus moved")
        } catch {
            #expect(mover.join(timeout: .seconds(10)) == true)
            try body(editor, browser, sink, text, error)
        }
    }

    /// A long text (600 distinct CJK characters through scratch keycodes: several seconds) is typed across turns
    /// of about `TypeSink.turn` (`Scope.turnUsedUp`, nothing counted delivered until its last piece), another
    /// session's text can be typed between two turns, and every character arrives once, in order.
    @Test func aLongTextIsTypedAcrossTurnsWithAnotherSessionBetween() throws {
        let server = try XvfbServer()
        defer { server.stop() }
        let editor = try XtermWindow(display: server.display, title: "editor")
        defer { editor.stop() }
        let sink = try TypeSink(backend: .x11, pressEnter: false, environment: server.environment)
        defer { sink.close() }
        let text = String(String.UnicodeScalarView((0x4E00..<0x4E00 + 600).map { Unicode.Scalar($0)! }))
        try editor.focus()
        var turns = 0
        var progress: [Int] = []
        while true {
            let started = ContinuousClock.now
            do {
                try sink.deliver([text], sessions: ["phone/1"], turn: TypeSink.turn) { progress.append($0) }
                break
            } catch {
                #expect(error.scope == .turnUsedUp && error.delivered == 0, "\(error.message)")
                #expect(ContinuousClock.now - started < TypeSink.turn + .seconds(2), "a turn went on far too long")
                turns += 1
                if turns == 1 { try sink.deliver(["hello"], sessions: ["laptop/7"]) { _ in } }
                if turns > 60 || error.scope != .turnUsedUp { break }
            }
        }
        #expect(turns >= 1, "typed in one turn: the text is too short to test turns here")
        #expect(progress.allSatisfy { $0 == 1 })
        let expectedCount = text.unicodeScalars.count + "hello".count
        let deadline = ContinuousClock.now + .seconds(30)
        var got = editor.received()
        while got.unicodeScalars.count < expectedCount, ContinuousClock.now < deadline {
            sleepFor(.milliseconds(20))
            got = editor.received()
        }
        #expect(got.replacingOccurrences(of: "hello", with: "") == text, "characters lost or repeated")
        #expect(got.unicodeScalars.count == expectedCount)
        #expect(!got.hasPrefix("hello") && !got.hasSuffix("hello"), "the other session was not typed between turns")
    }

    /// Scratch bindings stay while the sink lives (no revert race) and are gone when it closes.
    @Test func bindingsAreRemovedOnClose() throws {
        let server = try XvfbServer()
        defer { server.stop() }
        let spareAtStart = try XKeyboard(displayName: server.display).probe()
        #expect(spareAtStart > 2)
        let keyboard = try XKeyboard(displayName: server.display)
        #expect(try keyboard.type("ÄÖ") == nil)
        #expect(try XKeyboard(displayName: server.display).probe() == spareAtStart - 2)
        keyboard.close()
        #expect(try XKeyboard(displayName: server.display).probe() == spareAtStart)
        #expect(throws: TypingFailure.self) { try keyboard.type("after close") }
    }

    /// The X server going away mid-session is an error for the text, not the end of the process (Xlib's default
    /// I/O error handler would exit).
    @Test func aDyingXServerIsAnErrorNotAnExit() throws {
        let server = try XvfbServer(stoppedWhileUsed: true)
        let xterm = try XtermWindow(display: server.display, title: "doomed")
        defer { xterm.stop() }
        try xterm.focus()
        let sink = try TypeSink(backend: .x11, pressEnter: false, environment: server.environment)
        defer { sink.close() }
        try sink.deliver(["before"]) { _ in }
        server.stop()
        do {
            try sink.deliver(["after"]) { _ in }
            Issue.record("typed without an X server")
        } catch {
            #expect(error.delivered == 0)
            #expect(error.message.contains(server.display))
        }
    }

    /// The clipboard sink's probe: a dead DISPLAY stops `serve` at start ("cannot open display :N").
    @Test func clipboardProbe() throws {
        let server = try XvfbServer()
        defer { server.stop() }
        let good = try ClipboardSink(backend: .xclip, primary: false, environment: server.environment)
        try good.probe()
        #expect(good.method == "xclip on X11 \(server.display) (CLIPBOARD)")
        let display = ":\(unusedDisplayNumber())"
        let dead = try ClipboardSink(backend: .xclip, primary: true, environment: ["DISPLAY": display, "PATH": "/usr/bin:/bin"])
        do {
            try dead.probe()
            Issue.record("probe passed with a dead display")
        } catch {
            #expect(error.message == "cannot open display \(display)")
        }
    }
}

func runXdotool(_ arguments: [String], display: String) throws {
    let tool = Process()
    tool.executableURL = URL(fileURLWithPath: try systemTool("xdotool").orThrow("xdotool is not installed"))
    tool.arguments = arguments
    tool.environment = ["DISPLAY": display, "PATH": "/usr/bin:/bin"]
    tool.standardOutput = FileHandle.nullDevice
    tool.standardError = FileHandle.nullDevice
    try tool.run()
    tool.waitUntilExit()
    guard tool.terminationStatus == 0 else { throw TestFailure("xdotool \(arguments) failed") }
}
