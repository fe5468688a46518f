internal import Glibc
internal import SpeakBridgeSupport

/// One way of turning text into key presses in the user's session (see `TypeSink` for the choice).
protocol Typist: Sendable {
    /// What the method is and why it was chosen, for `status` and the start-up log.
    var method: String { get }
    /// Whether `focusedWindow()` can see which window has the focus (X11 yes, Wayland no).
    var tracksFocus: Bool { get }
    /// Checks that typing can work now; throws the reason and what to do.
    func probe() throws(SinkError)
    /// The window that has the keyboard focus, nil when none (only meaningful when `tracksFocus`).
    func focusedWindow() throws(SinkError) -> FocusedWindow?
    /// Whether the top-level window `id` still exists.
    func windowExists(_ id: UInt) -> Bool
    /// Types `keys` (`\n` is Enter) at the focus, from its scalar number `skipping` on. With `window` (only when
    /// `tracksFocus`), stops early when that window loses the focus, and with `deadline` soon after it passed
    /// (between two of the method's units: a checked run of scalars, a tool run); returns how many scalars are
    /// typed by then, nil when all are. A failure says how many were typed before it (`TypingFailure.typed`).
    func type(_ keys: String, skipping: Int, in window: UInt?, until deadline: ContinuousClock.Instant?)
        throws(TypingFailure) -> Int?
    func close()
}

/// A typing call that failed, and how far it got: the scalars of the text typed before the failure (counting the
/// `skipping` ones), which the retry must not type again. A unit the method cannot see into (a tool run that
/// failed) counts as not typed.
struct TypingFailure: Error {
    var error: SinkError
    var typed: Int
}

extension Typist {
    /// `type` without a deadline.
    func type(_ keys: String, skipping: Int, in window: UInt?) throws(TypingFailure) -> Int? {
        try type(keys, skipping: skipping, in: window, until: nil)
    }
}

/// X11: in-process XTEST with keysym remapping (`XKeyboard`).
final class X11Typist: Typist {
    private let keyboard: XKeyboard
    private let spare = Locked<Int?>(nil)

    init(display: String) throws(SinkError) {
        keyboard = try XKeyboard(displayName: display)
    }

    var method: String {
        let count = spare.withLock { $0 }
        let remap = count.map { $0 > 0 ? "characters outside the keyboard layout bound to \($0) spare keycodes"
                                       : "no spare keycode: only characters of the keyboard layout" }
        return "XTEST on X11 \(keyboard.displayName) (" + (remap ?? "keysym remapping for characters outside the layout")
            + "; focus-safe)"
    }

    var tracksFocus: Bool { true }

    func probe() throws(SinkError) {
        let count = try keyboard.probe()
        spare.withLock { $0 = count }
        _ = try keyboard.focusedWindow()
    }

    func focusedWindow() throws(SinkError) -> FocusedWindow? { try keyboard.focusedWindow() }

    func windowExists(_ id: UInt) -> Bool { keyboard.windowExists(id) }

    func type(_ keys: String, skipping: Int, in window: UInt?, until deadline: ContinuousClock.Instant?)
        throws(TypingFailure) -> Int? {
        try keyboard.type(keys, skipping: skipping, in: window, until: deadline)
    }

    func close() { keyboard.close() }
}

/// Wayland through a command-line tool: wtype (the wlroots virtual-keyboard protocol) or ydotool (/dev/uinput).
///
/// wtype makes a new virtual keyboard per run, and the first keys of a run can be lost (sway 1.7 + foot: 4 of 20
/// runs). Why, from foot's protocol log (WAYLAND_DEBUG=1): where the virtual keyboard is the seat's only keyboard
/// (a headless seat; a machine without a physical keyboard), each run makes the seat gain the keyboard capability
/// and lose it again at exit. The client then binds a new wl_keyboard, asynchronously; a key pressed before that
/// binding exists reaches the client only as "already held" in `wl_keyboard.enter`, which clients rightly ignore,
/// followed by its release — the character is gone. wtype's own roundtrip after uploading its keymap syncs with
/// the compositor, not with the client, so it cannot prevent this. A pause before the first key (`wtype -s`) gives
/// the client time to bind: 0 lost in 3 × 7 runs (and 0 in 30 more) with `settle`. Enter is pressed with
/// `-k Return` between lines.
///
/// The text goes to either tool on its standard input (`wtype -`, `ydotool type --file /dev/stdin`), never in its arguments:
/// a process's arguments are world-readable in /proc/PID/cmdline, and a wtype run lasts at least its settle time
/// (ydotool 12 ms a key), long enough for another local user polling `ps` to read every dictated line.
///
/// ydotool (Debian 12: 0.1.8) types through a virtual evdev device with a US layout: it cannot type characters
/// outside ASCII, so texts with them are refused (held) with a hint instead of being typed wrong.
final class ToolTypist: Typist {
    enum Tool: String, Sendable { case wtype, ydotool }

    let tool: Tool
    private let path: String
    private let environment: [String: String]
    /// Where the compositor says which window has the focus (sway's IPC); nil elsewhere.
    private let focus: SwayFocus?
    static let settle = 120  // milliseconds before wtype's first key
    /// Most scalars one ydotool run types (about 1.5 s at its 12 ms a key): a long text goes in several runs, so
    /// the focus and the sink's turn (`TypeSink.turn`) are checked between them.
    static let ydotoolPiece = 128

    init(tool: Tool, path: String, environment: [String: String]) {
        self.tool = tool
        self.path = path
        self.environment = environment
        focus = SwayFocus(environment: environment)
    }

    var method: String {
        let focusNote = focus == nil ? "no focus tracking: this compositor offers no focus query"
                                     : "focus-safe through sway's IPC"
        switch tool {
        case .wtype:
            return "wtype on Wayland \(environment["WAYLAND_DISPLAY"] ?? "") (virtual-keyboard protocol; \(Self.settle) ms "
                + "settle before the first key; \(focusNote))"
        case .ydotool:
            return "ydotool through /dev/uinput (US layout: ASCII only; \(focusNote))"
        }
    }

    var tracksFocus: Bool { focus != nil }

    func focusedWindow() throws(SinkError) -> FocusedWindow? { try focus?.focused() }

    func windowExists(_ id: UInt) -> Bool { focus?.exists(id) ?? true }

    /// wtype: the compositor must run as this user or root (`DisplayProbe.connectWayland`), then one run that
    /// only sleeps (it binds the seat and the virtual-keyboard manager, makes a keyboard, types nothing); on sway,
    /// one focus query. ydotool: /dev/uinput must be writable.
    func probe() throws(SinkError) {
        switch tool {
        case .wtype:
            let compositor = try DisplayProbe.connectWayland(environment)
            defer { Glibc.close(compositor) }
            do {
                try ToolRunner.run(path, ["-s", "1"], input: nil, environment: environment, timeout: .seconds(5),
                                   waylandSocket: compositor)
            } catch {
                throw Self.wtypeProblem(error, environment: environment)
            }
            _ = try focus?.focused()
        case .ydotool:
            if let problem = Self.ydotoolSocketProblem(environment: environment) { throw problem }
            guard access("/dev/uinput", W_OK) == 0 else {
                throw SinkError(message: "ydotool cannot type: /dev/uinput is missing or not writable by this user",
                                hint: "load the uinput module and give your user access to /dev/uinput, or use --sink clipboard")
            }
        }
    }

    /// The probe's failure in the user's terms: a compositor without the protocol is named.
    static func wtypeProblem(_ failure: ToolRunner.Failure, environment: [String: String]) -> SinkError {
        let display = environment["WAYLAND_DISPLAY"] ?? ""
        if failure.stderr.contains("virtual keyboard protocol") {
            let desktop = environment["XDG_CURRENT_DESKTOP"].flatMap { $0.isEmpty ? nil : $0 } ?? "the compositor at \(display)"
            let portal = ["GNOME", "KDE"].contains { desktop.uppercased().contains($0) }
                ? " (GNOME and KDE allow typing only through the RemoteDesktop portal, which speakbridge does not use)" : ""
            return SinkError(message: "\(desktop) has no virtual-keyboard protocol, so wtype cannot type\(portal)",
                             hint: "use --sink clipboard (or ydotool with a writable /dev/uinput)")
        }
        return SinkError(message: "wtype cannot type on Wayland display \(display): " + failure.message(tool: "wtype"),
                         hint: "check that the compositor at WAYLAND_DISPLAY=\(display) is running")
    }

    func arguments(typing keys: String) -> [[String]] { runs(typing: keys).map(\.arguments) }

    /// The tool runs that type `keys`: each one's arguments, the text it reads on stdin (nil: none), and how many
    /// of its scalars the run types.
    func runs(typing keys: String) -> [(arguments: [String], input: [UInt8]?, scalars: Int)] {
        switch tool {
        case .ydotool:
            // `--file /dev/stdin`, not `--file -`: ydotool 1.0.0 and 1.0.1 open a file named `-` (in the tool's working
            // directory, which ToolRunner sets to /); every version opens /dev/stdin.
            let scalars = Array(keys.unicodeScalars)
            return stride(from: 0, to: max(scalars.count, 1), by: Self.ydotoolPiece).map { start in
                let piece = scalars[start..<min(start + Self.ydotoolPiece, scalars.count)]
                return (["type", "--file", "/dev/stdin"],
                        Array(String(String.UnicodeScalarView(piece)).utf8), piece.count)
            }
        case .wtype:
            // One run per line; Enter before every line but the first, and after the last when the text ends in one.
            var lines = keys.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let enterAtEnd = lines.count > 1 && lines.last == ""
            if enterAtEnd { lines.removeLast() }
            var runs: [(arguments: [String], input: [UInt8]?, scalars: Int)] = []
            for (index, line) in lines.enumerated() {
                var run = ["-s", "\(Self.settle)"]
                if index > 0 { run += ["-k", "Return"] }
                if !line.isEmpty { run.append("-") }
                if run.count > 2 {
                    runs.append((run, line.isEmpty ? nil : Array(line.utf8), line.unicodeScalars.count + (index > 0 ? 1 : 0)))
                }
            }
            if enterAtEnd { runs.append((["-s", "\(Self.settle)", "-k", "Return"], nil, 1)) }
            return runs
        }
    }

    /// Where ydotool would send the key events, and why that place must not be used: the daemon's socket, which
    /// ydotool 1.x takes from YDOTOOL_SOCKET, else $XDG_RUNTIME_DIR/.ydotool_socket, else /tmp/.ydotool_socket, and
    /// 0.1.8 (Debian 12) always at /tmp/.ydotool_socket, falling back to /dev/uinput when nothing listens there. A
    /// socket there of another user would receive every key typed (in /tmp anyone may create that name while no
    /// ydotoold runs). Which of the paths this ydotool uses is not known here, so each one that exists is judged:
    /// a socket must be this user's or root's, and so must a symbolic link (its owner could point it elsewhere at
    /// any moment) and the socket it leads to. Anything else there (a plain file, a directory) is harmless: ydotool
    /// cannot connect to it, and 0.1.8 then types through /dev/uinput. The sticky /tmp keeps a socket of ours or
    /// root's from being replaced.
    ///
    /// Left, and not closable from here: the moment between this check and the tool's own connect(2), while no
    /// socket exists at a path (the next check then finds one and refuses). For wtype and wl-copy the window is
    /// closed by handing them a connection made and judged here (libwayland's WAYLAND_SOCKET,
    /// `DisplayProbe.connectWayland`); ydotool has no such way in: 0.1.8 connects to the fixed path
    /// /tmp/.ydotool_socket itself (seen with Debian 12's build: given a stream socket listening there, it
    /// connected and sent its key events to it), and 1.x to the path it is given. A connection of ours, judged with
    /// SO_PEERCRED and closed just before, says nothing about the one ydotool makes after it; a path we control
    /// (YDOTOOL_SOCKET, 1.x only) would need a relay of our own in front of ydotoold. Running ydotoold, as root or
    /// this user, keeps the name taken.
    static func ydotoolSocketProblem(environment: [String: String]) -> SinkError? {
        var candidates: [String] = []
        if let chosen = environment["YDOTOOL_SOCKET"], !chosen.isEmpty { candidates.append(chosen) }
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            candidates.append(runtime + "/.ydotool_socket")
        }
        candidates.append("/tmp/.ydotool_socket")
        for path in candidates {
            let shown = PeerText.escape(path)
            // Nothing there, or a plain file (ignored by ydotool, so nobody can switch typing off that way): next.
            switch SocketFile.judge(path) {
            case .ours, .unreadable, .notASocket:
                continue
            case .foreignLink(let uid):
                return SinkError(message: "ydotool would send the keys through \(shown), a symbolic link of uid \(uid) (not this user or root): held",
                                 hint: "remove it (another user may be listening where it leads), or start ydotoold as root or as this user")
            case .foreignSocket(let uid):
                return SinkError(message: "ydotool would send the keys to \(shown), a socket of uid \(uid) (not this user or root): held",
                                 hint: "remove it (another user may be listening), or start ydotoold as root or as this user")
            }
        }
        return nil
    }

    /// With `window` (sway), the focus is checked before each run after the first, and so is `deadline`; a run
    /// is the unit that cannot be stopped midway (ydotool types at most `ydotoolPiece` scalars in one). Each wtype
    /// run gets a connection to a compositor of this user or root (`DisplayProbe.connectWayland`); another user's
    /// is refused with nothing typed.
    func type(_ keys: String, skipping: Int, in window: UInt?, until deadline: ContinuousClock.Instant?)
        throws(TypingFailure) -> Int? {
        var typed = skipping
        do throws(SinkError) {
            return try type(keys, skipping: skipping, in: window, until: deadline, typed: &typed)
        } catch {
            throw TypingFailure(error: error, typed: typed)
        }
    }

    /// `typed`: the scalars typed so far, each run's counted once it succeeded.
    private func type(_ keys: String, skipping: Int, in window: UInt?, until deadline: ContinuousClock.Instant?,
                      typed: inout Int) throws(SinkError) -> Int? {
        let keys = skipping > 0 ? String(String.UnicodeScalarView(keys.unicodeScalars.dropFirst(skipping))) : keys
        if tool == .ydotool, let foreign = keys.unicodeScalars.first(where: { !$0.isASCII }) {
            throw SinkError(message: "ydotool can only type ASCII; this text has U+\(String(foreign.value, radix: 16, uppercase: true)): held",
                            hint: "use --sink clipboard for such text, or a compositor with the virtual-keyboard protocol (wtype)",
                            scope: .session)
        }
        if tool == .ydotool, let problem = Self.ydotoolSocketProblem(environment: environment) { throw problem }
        for (index, run) in runs(typing: keys).enumerated() {
            if index > 0, let window, let focus, (try? focus.focused())?.id != window { return typed }
            if index > 0, let deadline, ContinuousClock.now >= deadline { return typed }
            let timeout = Duration.seconds(10) + .milliseconds(20) * keys.unicodeScalars.count
            // wtype connects through a connection made and judged here, before each run: the compositor the
            // probe accepted may have gone since, and another user's taken its name.
            let compositor = tool == .wtype ? try DisplayProbe.connectWayland(environment) : nil
            defer { if let compositor { Glibc.close(compositor) } }
            do {
                try ToolRunner.run(path, run.arguments, input: run.input, environment: environment, timeout: timeout,
                                   waylandSocket: compositor)
            } catch {
                throw SinkError(message: error.message(tool: tool.rawValue, hiding: [keys]), hint: failureHint)
            }
            typed += run.scalars
        }
        return nil
    }

    private var failureHint: String {
        switch tool {
        case .wtype: "wtype needs a compositor with the virtual-keyboard protocol (sway, Hyprland, river…); use --sink clipboard elsewhere"
        case .ydotool: "make sure /dev/uinput is writable by this user"
        }
    }

    func close() {}
}
