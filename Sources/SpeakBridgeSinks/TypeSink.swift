internal import Glibc
internal import SpeakBridgeSupport

/// How the type sink turns text into key presses.
public enum TypeBackend: String, Sendable, CaseIterable {
    /// X11: XTEST in-process (libX11 ≥ 1.8 and libXtst, loaded at run time), with keysym remapping for characters
    /// outside the keyboard layout, and focus safety.
    case x11
    /// Wayland compositors with the virtual-keyboard protocol (sway, Hyprland, river…), from the Debian package wtype.
    case wtype
    /// Any session through /dev/uinput, from the Debian package ydotool (ASCII only).
    case ydotool

    /// The Debian package that provides it.
    public var debianPackage: String {
        switch self {
        case .x11: "libxtst6"
        case .wtype: "wtype"
        case .ydotool: "ydotool"
        }
    }

    /// With WAYLAND_DISPLAY: wtype, then ydotool (X11 typing would only reach XWayland windows). With DISPLAY:
    /// x11. Throws with a hint naming the package to install or the missing variable. Whether the method really
    /// works here is `TypeSink.probe()`'s question.
    public static func choose(environment: [String: String]) throws(SinkError) -> TypeBackend {
        let wayland = !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty
        let x11 = !(environment["DISPLAY"] ?? "").isEmpty
        if wayland {
            for backend in [TypeBackend.wtype, .ydotool] where ToolRunner.find(backend.rawValue, environment: environment) != nil {
                return backend
            }
            throw SinkError(message: "no typing tool for Wayland: neither wtype nor ydotool found in PATH",
                            hint: "install the Debian package wtype (or ydotool, which needs a writable /dev/uinput)")
        }
        if x11 {
            _ = try XLib.load()
            return .x11
        }
        throw SinkError(message: "no graphical session for the type sink: DISPLAY and WAYLAND_DISPLAY are unset",
                        hint: "run the daemon inside your desktop session, or export DISPLAY (X11) or WAYLAND_DISPLAY (Wayland)")
    }
}

/// Types each text at the cursor of the focused window.
///
/// Rules:
/// - Texts are always sanitized (`OutputSanitizer`), whatever `--raw` says: typed control characters are key
///   presses (Escape, Backspace…) in whatever window has the focus.
/// - Without `pressEnter`, line breaks and tabs become spaces, and consecutive texts of a session (also across
///   `deliver` calls) are separated by one space, typed before the next text: Enter and Tab are never pressed.
///   A session's first text gets no space.
/// - With `pressEnter` (`type:enter`), line breaks inside a text and one after each text are typed as Enter.
/// - Empty texts type nothing.
/// - Focus safety where the method can see the focus (X11, see `FocusGuard`): a session types only into the
///   window focused at its first text; otherwise the text is held (`deliver` fails with the reason, nothing typed).
///   Such a hold, and a text the method cannot type, hold only that session (`SinkError.Scope.session`): the
///   daemon types other devices' texts meanwhile. No window focused at all holds every session.
/// - The daemon's `deliver` calls type for about `turn` each at most (checked between texts and while typing one):
///   then the call stops (`SinkError.Scope.turnUsedUp`) and the rest of the text is typed when it comes again,
///   after other devices' texts, so one device's long text cannot keep the keyboard from the others for minutes.
///   (A tool run is not cut: wtype types a line per run, ydotool at most 128 characters.)
/// - A text stopped midway (its turn used up, its window lost the focus, or the method failed after typing part of
///   it: wtype a line per run, ydotool a piece) is remembered per session: the rest is typed when it comes again,
///   also after other sessions typed meanwhile. A tool run that failed counts as not typed.
/// - Only into a session of this user or root: who runs the X server or the Wayland compositor is asked of the
///   kernel (SO_PEERCRED; on Wayland also who owns the socket file, before every wtype run, which then uses that
///   very connection). Another user's is refused: `probe` and `deliver` fail with the reason, nothing is typed.
/// - One typing call per text; `willComplete(k)` right before the call that types text k.
public final class TypeSink: DescribedSink, FocusTrackingSink {
    public let pressEnter: Bool
    public let label: String
    private let environment: [String: String]
    private let typist: Locked<any Typist>
    private let focus = Locked(FocusGuard())
    /// Sessions that have typed (so their next text needs a separating space), least recent first, bounded.
    private let typedSessions = Locked<[String]>([])
    /// Texts whose typing stopped midway (the focus moved, the turn was used up, the method failed after part of
    /// it), at most one per session, least recent first, bounded by `sessionMemory`: the rest is typed when the text
    /// comes again. A device's texts are handed over in order, so it has at most one of them at a time (a revoked
    /// device's may stay until evicted).
    private let partials = Locked<[Partial]>([])
    private struct Partial: Sendable {
        var session: String
        var keys: String
        var typed: Int
    }
    private static let sessionMemory = 256
    /// How long one `deliver` call of the daemon's pipeline types at most, about (a text stops between two checked
    /// runs of scalars, or tool runs).
    public static let turn: Duration = .seconds(2)

    /// Throws when the method cannot be set up at all (tool not in PATH, X libraries missing), with a hint.
    public init(backend: TypeBackend, pressEnter: Bool, environment: [String: String]) throws(SinkError) {
        self.pressEnter = pressEnter
        self.label = pressEnter ? "type:enter" : "type"
        self.environment = environment
        typist = Locked(try Self.makeTypist(backend, environment: environment))
    }

    private static func makeTypist(_ backend: TypeBackend, environment: [String: String]) throws(SinkError) -> any Typist {
        switch backend {
        case .x11:
            return try X11Typist(display: environment["DISPLAY"] ?? "")
        case .wtype, .ydotool:
            guard let path = ToolRunner.find(backend.rawValue, environment: environment) else {
                throw SinkError(message: "\(backend.rawValue) not found in PATH",
                                hint: "install the Debian package \(backend.debianPackage)")
            }
            return ToolTypist(tool: backend == .wtype ? .wtype : .ydotool, path: path, environment: environment)
        }
    }

    /// The method in use (it can change from wtype to ydotool in `probe`).
    public var backend: TypeBackend {
        let current = typist.withLock { $0 }
        if let tool = current as? ToolTypist { return tool.tool == .wtype ? .wtype : .ydotool }
        return .x11
    }

    public var method: String { typist.withLock { $0 }.method }

    /// Checks the method (display reachable, run by this user or root, and XTEST present; the compositor run by
    /// this user or root and with the virtual-keyboard protocol; /dev/uinput writable). Where the compositor
    /// refuses wtype and ydotool can work, switches to ydotool; not where the compositor is another user's.
    public func probe() throws(SinkError) {
        let current = typist.withLock { $0 }
        if (current as? ToolTypist)?.tool == .wtype {
            // Another user's compositor is refused as such, never a reason to fall back to ydotool: its keys go
            // to whichever session has the seat, which may be that user's.
            try DisplayProbe.checkWayland(environment)
        }
        do {
            try current.probe()
        } catch let refusal {
            guard (current as? ToolTypist)?.tool == .wtype,
                  let path = ToolRunner.find("ydotool", environment: environment) else { throw refusal }
            let fallback = ToolTypist(tool: .ydotool, path: path, environment: environment)
            do { try fallback.probe() } catch { throw refusal }  // the compositor's refusal, not ydotool's
            typist.withLock { $0 = fallback }
        }
    }

    /// What is typed for `text`: sanitized, line breaks as the rules above say, with a leading space when
    /// `continuing` (something was typed before) and Enter is not used as the separator. Empty when nothing is typed.
    public static func keystrokes(for text: String, pressEnter: Bool, continuing: Bool) -> String {
        let clean = OutputSanitizer.sanitize(text)
        if clean.isEmpty { return "" }
        if pressEnter {
            return clean.replacingTabs() + "\n"
        }
        let flat = String(String.UnicodeScalarView(clean.unicodeScalars.map { $0 == "\n" || $0 == "\t" ? " " : $0 }))
        return continuing ? " " + flat : flat
    }

    public var health: String? { nil }

    public func waitUntilReady(timeout: Duration) -> String? { nil }

    /// All texts as one session (the sink's first text picks the window). See `deliver(_:sessions:willComplete:)`.
    public func deliver(_ texts: [String], willComplete: (Int) throws -> Void) throws(SinkError) {
        try deliver(texts, sessions: Array(repeating: "", count: texts.count), willComplete: willComplete)
    }

    /// Without a turn: types until done or held.
    public func deliver(_ texts: [String], sessions: [String], willComplete: (Int) throws -> Void) throws(SinkError) {
        try deliver(texts, sessions: sessions, turn: nil, willComplete: willComplete)
    }

    /// `turn`: how long this call types at most, about (the pipeline passes `TypeSink.turn`; nil: no limit).
    public func deliver(_ texts: [String], sessions: [String], turn: Duration?,
                        willComplete: (Int) throws -> Void) throws(SinkError) {
        let typist = typist.withLock { $0 }
        let deadline = turn.map { ContinuousClock.now + $0 }
        for (index, text) in texts.enumerated() {
            let session = index < sessions.count ? sessions[index] : ""
            if index > 0, let deadline, ContinuousClock.now >= deadline { throw turnUsedUp(delivered: index) }
            let continuing = typedSessions.withLock { $0.contains(session) }
            let keys = Self.keystrokes(for: text, pressEnter: pressEnter, continuing: continuing)
            var window: FocusedWindow?
            if !keys.isEmpty, typist.tracksFocus {
                window = try checkFocus(session: session, typist: typist, delivered: index)
            }
            do { try willComplete(index + 1) } catch {
                throw SinkError(delivered: index, message: "could not record progress: \(error)")
            }
            if keys.isEmpty { continue }
            let resume = partials.withLock { list in
                list.first { $0.session == session }.flatMap { $0.keys == keys ? $0.typed : nil } ?? 0
            }
            let stoppedAt: Int?
            do {
                stoppedAt = try typist.type(keys, skipping: resume, in: window?.id, until: deadline)
            } catch {
                // What was typed before the failure stays typed: the retry goes on after it.
                if error.typed > resume { remember(session: session, keys: keys, typed: error.typed) }
                throw SinkError(delivered: index, message: error.error.message, hint: error.error.hint,
                                scope: error.error.scope)
            }
            remember(session: session, keys: keys, typed: stoppedAt)
            if stoppedAt != nil {
                if let deadline, ContinuousClock.now >= deadline { throw turnUsedUp(delivered: index) }
                throw SinkError(delivered: index,
                                message: HeldReason.Marker.focusMovedWhileTyping + "\(window?.name ?? "")\" while typing: the rest "
                                    + "of the text is held until focus returns or `\(FocusGuard.retargetCommand)`",
                                hint: "focus the window again, or run `\(FocusGuard.retargetCommand)` to type where the focus is now",
                                scope: .session)
            }
            typedSessions.withLock { list in
                list.removeAll { $0 == session }
                if list.count >= Self.sessionMemory { list.removeFirst() }
                list.append(session)
            }
        }
    }

    /// How far the session's text `keys` got when its typing stopped midway (nil: all typed, nothing to remember).
    private func remember(session: String, keys: String, typed: Int?) {
        partials.withLock { list in
            guard typed != nil || !list.isEmpty else { return }
            list.removeAll { $0.session == session }
            guard let typed else { return }
            if list.count >= Self.sessionMemory { list.removeFirst() }
            list.append(Partial(session: session, keys: keys, typed: typed))
        }
    }

    /// This call typed for its whole `turn`: texts from `delivered` on (the rest of one, if it stopped midway) come
    /// again at the session's next turn.
    private func turnUsedUp(delivered: Int) -> SinkError {
        SinkError(delivered: delivered, message: "typed for a whole turn: other devices' texts go first",
                  scope: .turnUsedUp)
    }

    /// The session's target window when it has the focus; throws the hold reason otherwise.
    private func checkFocus(session: String, typist: any Typist, delivered: Int) throws(SinkError) -> FocusedWindow? {
        let focused: FocusedWindow?
        do { focused = try typist.focusedWindow() } catch {
            throw SinkError(delivered: delivered, message: error.message, hint: error.hint)
        }
        let verdict = focus.withLock { $0.check(session: session, focused: focused) { !typist.windowExists($0.id) } }
        if case .hold(let reason) = verdict {
            // No window focused holds every session; a target that lost the focus holds only its own session.
            throw SinkError(delivered: delivered, message: reason,
                            hint: "focus the window again, or run `\(FocusGuard.retargetCommand)` to type where the focus is now",
                            scope: focused == nil ? .sink : .session)
        }
        return focused
    }

    public func retarget() throws(SinkError) -> String {
        let typist = typist.withLock { $0 }
        focus.withLock { $0.retarget() }
        guard typist.tracksFocus else {
            return "this compositor offers no focus query: text is typed into whichever window has the focus"
        }
        guard let window = try typist.focusedWindow() else {
            return "no window has the keyboard focus now: the next text goes to the window focused then"
        }
        return "typing goes to \"\(window.name)\" from the next text on"
    }

    public func close() {
        typist.withLock { $0 }.close()
    }
}

private extension String {
    func replacingTabs() -> String {
        String(String.UnicodeScalarView(unicodeScalars.map { $0 == "\t" ? " " : $0 }))
    }
}
