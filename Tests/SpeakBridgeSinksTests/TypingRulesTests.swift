import Glibc
import Testing
import SpeakBridgeProtocol
@testable import SpeakBridgeSinks
import SpeakBridgeTestSupport

/// The pure parts of typing: keysyms, where a keysym is on the layout, the scratch-keycode pool, focus rules,
/// the Wayland tools' arguments.
@Suite struct TypingRulesTests {
    @Test func keysymsForText() {
        #expect(KeySymbol.keysym(for: "a") == 0x61)
        #expect(KeySymbol.keysym(for: "Ä") == 0xC4)
        #expect(KeySymbol.keysym(for: "ß") == 0xDF)
        #expect(KeySymbol.keysym(for: "\n") == 0xFF0D)
        #expect(KeySymbol.keysym(for: "€") == 0x0100_20AC)
        #expect(KeySymbol.keysym(for: "👋") == 0x0101_F44B)
        #expect(KeySymbol.keysym(for: "\u{A0}") == 0xA0)
    }

    /// Keycodes 8…11: a/A, 1/!, a lone "Ä" (Xlib reads it as ä unshifted), nothing.
    static let layout = KeyboardLayout(minKeycode: 8, perKeycode: 2, symbols: [
        0x61, 0x41,
        0x31, 0x21,
        0xC4, 0,
        0, 0,
    ])

    @Test func positionsOnTheLayout() {
        let layout = Self.layout
        #expect(layout.position(of: 0x61, shiftAvailable: true)! == (8, false))
        #expect(layout.position(of: 0x41, shiftAvailable: true)! == (8, true))
        #expect(layout.position(of: 0x41, shiftAvailable: false) == nil)
        #expect(layout.position(of: 0x21, shiftAvailable: true)! == (9, true))
        // The lone capital is not used: unshifted it would type "ä" (the bug xdotool has with Ä and Ö).
        #expect(layout.position(of: 0xC4, shiftAvailable: true) == nil)
        #expect(layout.unusedKeycodes == [11])
        #expect(layout.binding(for: 0xC4) == [0xC4, 0xC4])
        #expect(layout.holdsBinding(0xC4, at: 10) == false)
        // An XKB server reports a binding back with the keysym copied into the second group's columns.
        let echoed = KeyboardLayout(minKeycode: 8, perKeycode: 4, symbols: [0xDF, 0xDF, 0xDF, 0xDF])
        #expect(echoed.holdsBinding(0xDF, at: 8))
    }

    @Test func borrowsOnlyVendorKeysHighestFirst() {
        let layout = KeyboardLayout(minKeycode: 8, perKeycode: 2, symbols: [
            0x61, 0x41,
            0x1008_FF45, 0,          // XF86Launch5
            0x1008_FF46, 0x1008_FF46,
            0xFFE1, 0,               // Shift_L
        ])
        #expect(layout.borrowableKeycodes(limit: 5) == [10, 9])
        #expect(layout.borrowableKeycodes(limit: 1) == [10])
    }

    @Test func scratchKeysAreKeptAndReusedLeastRecentlyUsedAfterTheirAge() {
        let clock = ContinuousClock()
        let start = clock.now
        var keys = ScratchKeys(unused: [20, 21], minimumAge: .milliseconds(400))
        #expect(keys.assign(0xC4, now: start) == .bind(keycode: 20))
        keys.used(20, at: start)
        #expect(keys.assign(0xD6, now: start) == .bind(keycode: 21))
        keys.used(21, at: start + .milliseconds(10))
        // Bound keysyms stay bound: no mapping change for the next "Ä".
        #expect(keys.assign(0xC4, now: start + .milliseconds(20)) == .bound(keycode: 20))
        keys.used(20, at: start + .milliseconds(20))
        // A third keysym must wait until the least recently used keycode (21, used at +10 ms) is 400 ms old.
        #expect(keys.assign(0xDF, now: start + .milliseconds(30)) == .wait(until: start + .milliseconds(410)))
        #expect(keys.assign(0xDF, now: start + .milliseconds(410)) == .bind(keycode: 21))
        #expect(ScratchKeys(unused: [], minimumAge: .zero).count == 0)
        var none = ScratchKeys(unused: [], minimumAge: .zero)
        #expect(none.assign(0xC4, now: start) == .unavailable)
    }

    @Test func scratchKeysFollowTheServerAndGiveBorrowedKeysBack() {
        let clock = ContinuousClock()
        let start = clock.now
        var keys = ScratchKeys(unused: [10], borrowed: [(keycode: 9, original: [0x1008_FF45, 0])], minimumAge: .zero)
        #expect(keys.assign(0xC4, now: start) == .bind(keycode: 10))
        keys.used(10, at: start)
        #expect(keys.assign(0xD6, now: start) == .bind(keycode: 9))
        keys.used(9, at: start + .seconds(4))
        // Idle: only borrowed keycodes are given back, and only after 5 s without use.
        #expect(keys.release(olderThan: .seconds(5), now: start + .seconds(6), borrowedOnly: true).isEmpty)
        let released = keys.release(olderThan: .seconds(5), now: start + .seconds(10), borrowedOnly: true)
        #expect(released.map(\.keycode) == [9])
        #expect(ScratchKeys.restoreRow(released[0], perKeycode: 3) == [0x1008_FF45, 0, 0])
        // On close every binding goes, the unused keycode back to NoSymbol.
        let all = keys.release(olderThan: nil, now: start + .seconds(10))
        #expect(all.map(\.keycode) == [10])
        #expect(ScratchKeys.restoreRow(all[0], perKeycode: 2) == [0, 0])
        // Someone else (a layout switch) put other symbols on keycode 10: it leaves the pool.
        let changed = KeyboardLayout(minKeycode: 9, perKeycode: 2, symbols: [0x1008_FF45, 0, 0x61, 0x41])
        keys.reconcile(with: changed)
        #expect(keys.count == 1 && keys.isScratch(9) && !keys.isScratch(10))
    }

    @Test func focusGuardRules() {
        let editor = FocusedWindow(id: 1, name: "editor")
        let browser = FocusedWindow(id: 2, name: "browser")
        var guardian = FocusGuard(capacity: 2)
        #expect(guardian.check(session: "a", focused: editor) == .type)
        #expect(guardian.check(session: "a", focused: browser)
                == .hold("focus moved from window \"editor\" to \"browser\": held until focus returns or `speakbridge type --here`"))
        #expect(guardian.check(session: "b", focused: browser) == .type)
        #expect(guardian.check(session: "a", focused: editor) == .type)
        #expect(guardian.check(session: "a", focused: nil) == .hold("no window has the keyboard focus: held until one has it"))
        if case .hold(let why) = guardian.check(session: "a", focused: browser, targetGone: { _ in true }) {
            #expect(why.hasPrefix("the window \"editor\" this session typed into is gone"))
        } else {
            Issue.record("typed although the target window is gone")
        }
        // Bounded: a third session pushes out the least recently typed one ("b"), which then starts over.
        #expect(guardian.check(session: "c", focused: browser) == .type)
        #expect(guardian.target(of: "b") == nil && guardian.target(of: "a") == editor)
        guardian.retarget()
        #expect(guardian.check(session: "a", focused: browser) == .type)
        #expect(guardian.target(of: "a") == browser)
    }

    @Test func wtypeArgumentsSettleAndPressEnterBetweenLines() {
        let wtype = ToolTypist(tool: .wtype, path: "/usr/bin/wtype", environment: [:])
        let settle = "\(ToolTypist.settle)"
        #expect(wtype.arguments(typing: "-rf x") == [["-s", settle, "-"]])
        #expect(wtype.runs(typing: "-rf x").map(\.input) == [Array("-rf x".utf8)])
        #expect(wtype.arguments(typing: "one\ntwo\n") == [["-s", settle, "-"],
                                                          ["-s", settle, "-k", "Return", "-"],
                                                          ["-s", settle, "-k", "Return"]])
        #expect(wtype.runs(typing: "one\ntwo\n").map(\.input) == [Array("one".utf8), Array("two".utf8), nil])
        #expect(wtype.runs(typing: "one\ntwo\n").map(\.scalars) == [3, 4, 1])
        let ydotool = ToolTypist(tool: .ydotool, path: "/usr/bin/ydotool", environment: [:])
        #expect(ydotool.arguments(typing: "-x") == [["type", "--file", "/dev/stdin"]])
        #expect(ydotool.runs(typing: "-x").map(\.input) == [Array("-x".utf8)])
        // A long text goes in runs of at most 128 characters (each one ~1.5 s), so the focus and the typing sink's
        // turn are checked between them; together they type the text once, in order.
        let long = String(repeating: "ab ", count: 100)
        let runs = ydotool.runs(typing: long)
        #expect(runs.map(\.scalars) == [128, 128, 44])
        #expect(runs.allSatisfy { $0.arguments == ["type", "--file", "/dev/stdin"] })
        #expect(runs.flatMap { $0.input ?? [] } == Array(long.utf8))
    }

    /// The text never goes into a tool's arguments, which every local user can read in /proc/PID/cmdline while
    /// the tool runs: only on its stdin.
    @Test func dictationStaysOutOfToolArguments() {
        let secret = "my secret words\nsecond line"
        for tool in [ToolTypist.Tool.wtype, .ydotool] {
            let typist = ToolTypist(tool: tool, path: "/usr/bin/\(tool.rawValue)", environment: [:])
            let runs = typist.runs(typing: secret)
            #expect(!runs.isEmpty)
            for run in runs {
                #expect(!run.arguments.contains { $0.contains("secret") || $0.contains("second") }, "\(tool): \(run.arguments)")
            }
            let typed = runs.compactMap(\.input).map { String(decoding: $0, as: UTF8.self) }
            #expect(typed.joined(separator: tool == .wtype ? "\n" : "") == secret)
        }
    }

    /// ydotool sends its keys to a socket where a ydotoold may listen; one of another user, or anything but a
    /// socket, at any path the tool would try is refused before a key is typed.
    @Test func ydotoolRefusesAForeignSocket() throws {
        let dir = "/tmp/sb-ydotool-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        #expect(mkdir(dir, 0o700) == 0)
        defer { _ = unlink(dir + "/s"); _ = unlink(dir + "/f"); _ = unlink(dir + "/l"); _ = rmdir(dir) }
        let path = dir + "/s"
        let fd = boundUnixSocket(at: path)
        #expect(fd >= 0)
        defer { close(fd) }
        // Ours: accepted (the check says nothing about /tmp/.ydotool_socket unless one exists there).
        let ours = ToolTypist.ydotoolSocketProblem(environment: ["YDOTOOL_SOCKET": path])
        var tmpInfo = stat()
        if lstat("/tmp/.ydotool_socket", &tmpInfo) != 0 { #expect(ours == nil) }
        // Another user's (root can hand it over; elsewhere the test stops here).
        if getuid() == 0 {
            #expect(chown(path, 65534, 65534) == 0)
            let problem = try #require(ToolTypist.ydotoolSocketProblem(environment: ["YDOTOOL_SOCKET": path]))
            #expect(problem.message.contains("a socket of uid 65534 (not this user or root): held"))
            let typist = ToolTypist(tool: .ydotool, path: "/nonexistent/ydotool", environment: ["YDOTOOL_SOCKET": path])
            do {
                _ = try typist.type("hello", skipping: 0, in: nil)
                Issue.record("typed towards another user's socket")
            } catch {
                #expect(error.error.message.contains("uid 65534"))
            }
            #expect(throws: SinkError.self) { try typist.probe() }
        }
        // A symbolic link at a path ydotool tries: judged by its own owner and by the socket it leads to.
        if getuid() == 0 {
            let link = dir + "/l"
            #expect(symlink(path, link) == 0)  // ours, to the socket of uid 65534
            let viaLink = try #require(ToolTypist.ydotoolSocketProblem(environment: ["XDG_RUNTIME_DIR": "/nonexistent",
                                                                                    "YDOTOOL_SOCKET": link]))
            #expect(viaLink.message.contains("a socket of uid 65534"))
            #expect(lchown(link, 65534, 65534) == 0)  // now the link itself is another user's
            let foreignLink = try #require(ToolTypist.ydotoolSocketProblem(environment: ["YDOTOOL_SOCKET": link]))
            #expect(foreignLink.message.contains("a symbolic link of uid 65534"))
            _ = unlink(link)
        }
        // The $XDG_RUNTIME_DIR candidate is judged too.
        if getuid() == 0 {
            let runtime = dir + "/run"
            #expect(mkdir(runtime, 0o700) == 0)
            #expect(link(path, runtime + "/.ydotool_socket") == 0)  // the same socket inode, of uid 65534
            #expect(ToolTypist.ydotoolSocketProblem(environment: ["XDG_RUNTIME_DIR": runtime]) != nil)
            _ = unlink(runtime + "/.ydotool_socket")
            _ = rmdir(runtime)
        }
        // Anything but a socket is harmless there (ydotool cannot connect to it; 0.1.8 then uses /dev/uinput), so it
        // does not stop typing: a plain file in /tmp must not be a way for anyone to switch typing off.
        let file = dir + "/f"
        #expect(creat(file, 0o600) >= 0)
        var tmp = stat()
        if lstat("/tmp/.ydotool_socket", &tmp) != 0 {
            #expect(ToolTypist.ydotoolSocketProblem(environment: ["YDOTOOL_SOCKET": file]) == nil)
        }
    }

    /// ydotool types through a US-layout evdev device: text it cannot type is refused, not typed wrong.
    @Test func ydotoolRefusesWhatItCannotType() {
        let ydotool = ToolTypist(tool: .ydotool, path: "/nonexistent/ydotool", environment: [:])
        do {
            _ = try ydotool.type("Grüße", skipping: 0, in: nil)
            Issue.record("ydotool accepted non-ASCII text")
        } catch {
            #expect(error.error.message == "ydotool can only type ASCII; this text has U+FC: held")
        }
    }

    @Test func ydotoolProbeNeedsUinput() {
        let ydotool = ToolTypist(tool: .ydotool, path: "/usr/bin/ydotool", environment: [:])
        if access("/dev/uinput", W_OK) == 0 {
            #expect(throws: Never.self) { try ydotool.probe() }
        } else {
            #expect(throws: SinkError.self) { try ydotool.probe() }
        }
    }

    /// The compositor lacking the protocol is named, with the clipboard as the way out.
    @Test func wtypeProbeMessages() {
        let noProtocol = ToolRunner.Failure(.exited(status: 1), stderr: "Compositor does not support the virtual keyboard protocol")
        let gnome = ToolTypist.wtypeProblem(noProtocol, environment: ["WAYLAND_DISPLAY": "wayland-0", "XDG_CURRENT_DESKTOP": "GNOME"])
        #expect(gnome.message.hasPrefix("GNOME has no virtual-keyboard protocol, so wtype cannot type (GNOME and KDE"))
        #expect(gnome.hint?.hasPrefix("use --sink clipboard") == true)
        let weston = ToolTypist.wtypeProblem(noProtocol, environment: ["WAYLAND_DISPLAY": "wayland-1"])
        #expect(weston.message == "the compositor at wayland-1 has no virtual-keyboard protocol, so wtype cannot type")
        let dead = ToolTypist.wtypeProblem(ToolRunner.Failure(.exited(status: 1), stderr: "Wayland connection failed"),
                                           environment: ["WAYLAND_DISPLAY": "wayland-9"])
        #expect(dead.message == "wtype cannot type on Wayland display wayland-9: wtype failed with exit status 1: "
                              + "wtype: Wayland connection failed")
    }

    /// sway's tree: the focused window is the focused "con" (or "floating_con"); a focused workspace is no window.
    @Test func swayFocusFromTheTree() throws {
        let tree = try JSONValue.parse(Array("""
            {"id":1,"type":"root","focused":false,"nodes":[{"id":3,"type":"output","nodes":[{"id":4,"type":"workspace",
            "focused":false,"nodes":[{"id":5,"type":"con","name":"editor","focused":false,"nodes":[]}],
            "floating_nodes":[{"id":9,"type":"floating_con","name":null,"app_id":"pinentry","focused":true}]}]}]}
            """.utf8), maxDepth: 64)
        #expect(SwayFocus.focused(in: tree) == FocusedWindow(id: 9, name: "pinentry"))
        let empty = try JSONValue.parse(Array(#"{"id":1,"type":"root","nodes":[{"id":4,"type":"workspace","focused":true}]}"#.utf8))
        #expect(SwayFocus.focused(in: empty) == nil)
        #expect(SwayFocus(environment: ["PATH": "/usr/bin"]) == nil)  // no SWAYSOCK: no focus tracking
    }

    @Test(.enabled(if: systemTool("wtype") != nil, "wtype is not installed"))
    func retargetWithoutAFocusQuery() throws {
        let sink = try TypeSink(backend: .wtype, pressEnter: false, environment: ["WAYLAND_DISPLAY": "w", "PATH": "/usr/bin"])
        #expect(sink.method.contains("no focus tracking: this compositor offers no focus query"))
        #expect(try sink.retarget() == "this compositor offers no focus query: text is typed into whichever window has the focus")
    }

    @Test func waylandDisplayProbe() {
        let empty = TemporaryDirectory()
        defer { empty.remove() }
        do {
            try DisplayProbe.checkWayland(["WAYLAND_DISPLAY": "wayland-7", "XDG_RUNTIME_DIR": empty.path])
            Issue.record("probe passed without a compositor")
        } catch {
            #expect(error.message.hasPrefix("cannot connect to Wayland display wayland-7 ("))
        }
        #expect(throws: SinkError.self) { try DisplayProbe.checkWayland(["WAYLAND_DISPLAY": "wayland-7"]) }
    }
}
