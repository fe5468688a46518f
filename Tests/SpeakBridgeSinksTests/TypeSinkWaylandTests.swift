import Foundation
import Glibc
import Testing
@testable import SpeakBridgeSinks

/// The type sink on Wayland: wtype into a real foot terminal under a real headless sway, read back char for
/// char; a compositor without the virtual-keyboard protocol (weston) refused at start with a hint.
@Suite(.serialized)
struct TypeSinkWaylandTests {
    /// Three runs in a row of the seven chunks of every character class (each chunk is a wtype run whose first
    /// key wtype alone lost in 4 of 20 runs): nothing lost, nothing reordered, one space between chunks, no Enter.
    @Test(.enabled(if: WaylandCompositor.unavailable(.sway) == nil, "\(WaylandCompositor.unavailable(.sway) ?? "")"))
    func wtypeIntoFootUnderSwayThreeRunsInARow() throws {
        let sway = try WaylandCompositor(.sway)
        defer { sway.stop() }
        let chunks = everyCharacterChunks
        let expectedOnce = chunks.map { $0.replacingOccurrences(of: "\n", with: " ") }.joined(separator: " ")
        for run in 1...3 {
            let record = try sway.startFoot()
            let sink = try SinkFactory.make(.type(pressEnter: false), sanitize: true, environment: sway.environment)
            defer { sink.close() }
            #expect((sink as? DescribedSink)?.method.hasPrefix("wtype on Wayland \(sway.socketName)") == true)
            try sink.deliver(chunks) { _ in }
            let got = sway.received(record, expecting: expectedOnce)
            #expect(got == expectedOnce, "run \(run): \(difference(Array(got.utf8), Array(expectedOnce.utf8)) ?? "")")
        }
    }

    /// Focus safety on sway (through its IPC): held while another window has the focus, resumed when it returns.
    @Test(.enabled(if: WaylandCompositor.unavailable(.sway) == nil && systemTool("swaymsg") != nil,
                   "\(WaylandCompositor.unavailable(.sway) ?? "swaymsg is not installed")"))
    func focusSafetyOnSway() throws {
        let sway = try WaylandCompositor(.sway)
        defer { sway.stop() }
        let editor = try sway.startFoot(appID: "editor", title: "editor")
        let browser = try sway.startFoot(appID: "browser", title: "browser")
        let sink = try SinkFactory.make(.type(pressEnter: false), sanitize: true, environment: sway.environment)
        #expect((sink as? DescribedSink)?.method.contains("focus-safe through sway's IPC") == true)
        let typing = try #require(sink as? FocusTrackingSink)
        try sway.focus(appID: "editor")
        try typing.deliver(["first"], sessions: ["phone/1"]) { _ in }
        #expect(sway.received(editor, expecting: "first") == "first")
        try sway.focus(appID: "browser")
        do {
            try typing.deliver(["second"], sessions: ["phone/1"]) { _ in }
            Issue.record("typed into a window the session did not start in")
        } catch {
            #expect(error.message == "focus moved from window \"editor\" to \"browser\": held until focus returns or "
                                   + "`speakbridge type --here`")
        }
        try sway.focus(appID: "editor")
        try typing.deliver(["second"], sessions: ["phone/1"]) { _ in }
        #expect(sway.received(editor, expecting: "first second") == "first second")
        #expect(sway.received(browser, expecting: "", patience: .zero) == "")
    }

    @Test(.enabled(if: WaylandCompositor.unavailable(.sway) == nil, "\(WaylandCompositor.unavailable(.sway) ?? "")"))
    func wtypeEnterOnlyWithTypeEnter() throws {
        let sway = try WaylandCompositor(.sway)
        defer { sway.stop() }
        let record = try sway.startFoot()
        let sink = try TypeSink(backend: .wtype, pressEnter: true, environment: sway.environment)
        try sink.deliver(["first Ä", "two\nlines"]) { _ in }
        #expect(sway.received(record, expecting: "first Ä\ntwo\nlines\n") == "first Ä\ntwo\nlines\n")
    }

    /// A wtype run that fails after earlier lines of the text were typed (its second run, of three, exits 1: a
    /// wrapper in PATH in front of the real wtype): the retry types from the failed line on, never the first line
    /// again. (The lines typed before a failure used to be forgotten, and the retry typed "one" twice.)
    @Test(.enabled(if: WaylandCompositor.unavailable(.sway) == nil, "\(WaylandCompositor.unavailable(.sway) ?? "")"))
    func aFailedWtypeRunDoesNotRetypeTheLinesBeforeIt() throws {
        let sway = try WaylandCompositor(.sway)
        defer { sway.stop() }
        let record = try sway.startFoot()
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let wtype = try #require(systemTool("wtype"))
        let script = "#!/bin/sh\nn=$(cat \(directory.path)/runs 2>/dev/null || echo 0); n=$((n + 1)); echo $n > \(directory.path)/runs\n"
            + "if [ $n = 2 ]; then echo 'compositor went away' >&2; exit 1; fi\nexec \(wtype) \"$@\"\n"
        try script.write(toFile: directory.path + "/wtype", atomically: true, encoding: .utf8)
        #expect(chmod(directory.path + "/wtype", 0o755) == 0)
        var environment = sway.environment
        environment["PATH"] = directory.path + ":/usr/bin:/bin"
        let sink = try TypeSink(backend: .wtype, pressEnter: true, environment: environment)
        do {
            try sink.deliver(["one\ntwo\nthree"], sessions: ["phone/1"]) { _ in }
            Issue.record("a failed wtype run was not reported")
        } catch {
            #expect(error.delivered == 0)
            #expect(error.message.contains("compositor went away"), "\(error.message)")
        }
        #expect(sway.received(record, expecting: "one") == "one")
        try sink.deliver(["one\ntwo\nthree"], sessions: ["phone/1"]) { _ in }
        #expect(sway.received(record, expecting: "one\ntwo\nthree\n") == "one\ntwo\nthree\n")
    }

    /// weston has no virtual-keyboard protocol: `serve --sink type` stops at start, naming it, with a hint.
    @Test(.enabled(if: WaylandCompositor.unavailable(.weston) == nil && systemTool("wtype") != nil,
                   "weston or wtype is not installed (make test installs them)"))
    func westonIsRefusedAtStart() throws {
        let weston = try WaylandCompositor(.weston)
        defer { weston.stop() }
        try DisplayProbe.checkWayland(weston.environment)  // the compositor itself is reachable (wl-copy's probe)
        var environment = weston.environment
        environment["PATH"] = "/usr/bin:/bin"
        do {
            _ = try SinkFactory.make(.type(pressEnter: false), sanitize: true, environment: environment)
            if access("/dev/uinput", W_OK) != 0 { Issue.record("a type sink started on weston") }
        } catch {
            #expect(error.message == "the compositor at \(weston.socketName) has no virtual-keyboard protocol, so wtype cannot type")
            #expect(error.hint?.contains("--sink clipboard") == true)
        }
    }

    /// ydotool needs a writable /dev/uinput (a kernel feature this machine may not offer).
    @Test(.enabled(if: access("/dev/uinput", W_OK) == 0 && systemTool("ydotool") != nil,
                   "/dev/uinput is not usable here (no uinput module or no access): ydotool cannot be tested"))
    func ydotoolProbes() throws {
        let sink = try TypeSink(backend: .ydotool, pressEnter: false, environment: ["PATH": "/usr/bin:/bin"])
        try sink.probe()
        #expect(sink.method.hasPrefix("ydotool"))
    }
}
