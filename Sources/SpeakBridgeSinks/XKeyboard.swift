internal import Glibc
internal import SpeakBridgeSupport

/// Types text into the focused X11 window through the XTEST extension, and tells which window has the focus.
///
/// Typing flow (`type`), all under one lock, on one connection kept open between calls:
/// 1. (Re)connect if needed; read the core keyboard mapping (`KeyboardLayout`) and drop scratch bindings someone
///    else replaced (`ScratchKeys.reconcile`).
/// 2. Modifiers: a held Shift/Control/Alt/Super/AltGr would turn characters into shortcuts, so the text is held
///    (an error, retried by the daemon) while one is down. Caps Lock is switched off for the text and back on after.
/// 3. Per Unicode scalar: its keysym (`KeySymbol`); a keycode that has it at level 1 (or level 2 with Shift) of the
///    first layout group when that group is active, else
///    a scratch keycode bound to it (`XChangeKeyboardMapping`, kept bound, see `ScratchKeys`); then fake press and
///    release (with Shift around them when needed). Requests go out in order on one connection, so the server
///    applies a binding before the key that needs it.
/// 4. `XSync`: the server has processed every event before `type` returns. A lost connection is an error.
final class XKeyboard: Sendable {
    /// The display pointer, only used by Xlib calls made while `state`'s lock is held (and Xlib is initialised
    /// with XInitThreads), so it may move between threads.
    struct Connection: @unchecked Sendable {
        let display: OpaquePointer
        let root: UInt
        /// Set to 1 by Xlib's I/O-error exit handler when the server connection breaks.
        let dead: UnsafeMutablePointer<Int32>
    }

    struct State: Sendable {
        var connection: Connection?
        var scratch: ScratchKeys?
        var closed = false
    }

    let displayName: String
    private let lib: XLib
    private let state = Locked(State())
    /// A scratch keycode is rebound only this long after its last use (see `ScratchKeys`).
    static let rebindAge: Duration = .milliseconds(400)
    /// Borrowed keycodes idle this long get their own symbols back at the next text (every binding is removed on
    /// close), so a borrowed multimedia key works again soon after dictation pauses.
    static let restoreAge: Duration = .seconds(5)

    init(displayName: String) throws(SinkError) {
        self.lib = try XLib.load()
        self.displayName = displayName
    }

    deinit { close() }

    /// Opens the display and checks XTEST; returns how many spare keycodes there are for characters the layout
    /// lacks. Throws "cannot open display" or "no XTEST extension".
    func probe() throws(SinkError) -> Int {
        try state.withLock { state throws(SinkError) in
            _ = try connection(&state)
            return state.scratch?.count ?? 0
        }
    }

    /// Types `text` (see the flow above), `\n` as Return, from its scalar number `skipping` on. With `window`,
    /// stops when that top-level window no longer has the focus, and with `deadline` once it passed (both checked
    /// every `focusCheckInterval` scalars and after every wait for a scratch keycode), and returns how many
    /// scalars of `text` are typed by then; nil when all of it is.
    func type(_ text: String, skipping: Int = 0, in window: UInt? = nil,
              until deadline: ContinuousClock.Instant? = nil) throws(TypingFailure) -> Int? {
        try state.withLock { state throws(TypingFailure) -> Int? in
            let connection: Connection
            do throws(SinkError) { connection = try self.connection(&state) } catch {
                throw TypingFailure(error: error, typed: skipping)
            }
            let stoppedAt: Int?
            var typed = skipping
            do throws(SinkError) {
                stoppedAt = try type(text, skipping: skipping, in: window, until: deadline, on: connection,
                                     scratch: &state.scratch!, typed: &typed)
            } catch {
                if isDead(connection) { drop(&state) }
                throw TypingFailure(error: error, typed: typed)
            }
            if isDead(connection) {
                drop(&state)
                throw TypingFailure(error: lostConnection, typed: typed)
            }
            return stoppedAt
        }
    }

    static let focusCheckInterval = 32

    /// The top-level window that has the keyboard focus (nil when no window has it), with its title.
    func focusedWindow() throws(SinkError) -> FocusedWindow? {
        try state.withLock { state throws(SinkError) in
            let connection = try connection(&state)
            let window = XWindows(lib: lib, connection: connection).focused()
            if isDead(connection) {
                drop(&state)
                throw lostConnection
            }
            return window
        }
    }

    /// Whether the top-level window `id` still exists.
    func windowExists(_ id: UInt) -> Bool {
        state.withLock { state in
            guard let connection = try? connection(&state) else { return true }
            return XWindows(lib: lib, connection: connection).exists(id)
        }
    }

    /// Removes the scratch bindings and closes the connection.
    func close() {
        state.withLock { state in
            state.closed = true
            guard let connection = state.connection else { return }
            if !isDead(connection), var scratch = state.scratch {
                restore(scratch.release(olderThan: nil, now: ContinuousClock().now), display: connection.display,
                        perKeycode: readLayout(connection)?.perKeycode ?? 2)
                _ = lib.sync(connection.display, 0)
            }
            // After an I/O error Xlib (≥ 1.8, with the exit handler returning) marks the display dead: its calls
            // return without touching the socket, so closing it only frees memory.
            _ = lib.closeDisplay(connection.display)
            connection.dead.deallocate()
            state.connection = nil
            state.scratch = nil
        }
    }

    // MARK: - Steps

    private var lostConnection: SinkError {
        SinkError(message: "lost the connection to the X server at \(displayName)",
                  hint: "check that the X server at DISPLAY=\(displayName) is running")
    }

    private func isDead(_ connection: Connection) -> Bool {
        connection.dead.pointee != 0
    }

    /// Closes and forgets a dead connection (see `close`); the next call connects again.
    private func drop(_ state: inout State) {
        if let connection = state.connection {
            _ = lib.closeDisplay(connection.display)
            connection.dead.deallocate()
        }
        state.connection = nil
        state.scratch = nil
    }

    private func connection(_ state: inout State) throws(SinkError) -> Connection {
        if let connection = state.connection { return connection }
        if state.closed { throw SinkError(message: "the type sink is closed") }
        guard let (display, dead) = try lib.open(displayName) else {
            throw SinkError(message: "cannot open display \(displayName)",
                            hint: "check that an X server runs at DISPLAY=\(displayName) and that XAUTHORITY lets this user in")
        }
        var event: Int32 = 0, error: Int32 = 0, major: Int32 = 0, minor: Int32 = 0
        guard lib.testQueryExtension(display, &event, &error, &major, &minor) != 0 else {
            _ = lib.closeDisplay(display)
            dead.deallocate()
            throw SinkError(message: "the X server at \(displayName) has no XTEST extension, which typing needs",
                            hint: "use --sink clipboard, or enable XTEST in the X server")
        }
        let connection = Connection(display: display, root: lib.defaultRootWindow(display), dead: dead)
        let layout = readLayout(connection)
        state.connection = connection
        let unused = layout?.unusedKeycodes ?? []
        let borrowed = unused.count >= 8 ? [] : (layout?.borrowableKeycodes(limit: 32 - unused.count) ?? []).map {
            (keycode: $0, original: Array(layout!.symbols(of: $0)))
        }
        state.scratch = ScratchKeys(unused: unused, borrowed: borrowed, minimumAge: Self.rebindAge)
        return connection
    }

    private func readLayout(_ connection: Connection) -> KeyboardLayout? {
        var low: Int32 = 0, high: Int32 = 0
        _ = lib.displayKeycodes(connection.display, &low, &high)
        guard low >= 8, high >= low, high <= 255 else { return nil }
        var per: Int32 = 0
        guard let table = lib.getKeyboardMapping(connection.display, UInt8(low), high - low + 1, &per) else { return nil }
        defer { _ = lib.free(table) }
        let count = Int(high - low + 1) * Int(per)
        return KeyboardLayout(minKeycode: Int(low), perKeycode: Int(per),
                              symbols: Array(UnsafeBufferPointer(start: table, count: count)))
    }

    private func type(_ text: String, skipping: Int, in window: UInt?, until deadline: ContinuousClock.Instant?,
                      on connection: Connection, scratch: inout ScratchKeys, typed: inout Int) throws(SinkError) -> Int? {
        guard let layout = readLayout(connection) else {
            throw SinkError(message: "cannot read the keyboard mapping of the X server at \(displayName)")
        }
        scratch.reconcile(with: layout)
        let display = connection.display
        restore(scratch.release(olderThan: Self.restoreAge, now: ContinuousClock().now, borrowedOnly: true), display: display,
                perKeycode: layout.perKeycode)
        let shiftKey = layout.position(of: KeySymbol.shiftLeft, shiftAvailable: false)?.keycode
        let modifiers = XModifiers(lib: lib, connection: connection, layout: layout)
        if let held = modifiers.heldNames(), !held.isEmpty {
            throw SinkError(message: "a modifier key is held down (\(held.joined(separator: ", "))): typing would "
                                + "trigger shortcuts, held until it is released",
                            hint: "release the key; the text is typed then")
        }
        let capsKey = modifiers.capsLockOn ? layout.position(of: KeySymbol.capsLock, shiftAvailable: false)?.keycode : nil
        if modifiers.capsLockOn, capsKey == nil {
            throw SinkError(message: "Caps Lock is on and no key of the layout turns it off: typing would change "
                                + "the case of letters, held until Caps Lock is off", hint: "switch Caps Lock off")
        }
        // Without any spare keycode, a character the layout lacks cannot be typed: say so before typing any of
        // the text (stopping midway would type its beginning twice on the retry).
        if scratch.count == 0, let missing = text.unicodeScalars.dropFirst(skipping).first(where: {
            modifiers.group != 0 || layout.position(of: KeySymbol.keysym(for: $0), shiftAvailable: shiftKey != nil) == nil
        }) {
            throw SinkError(message: "the keyboard layout of the X server at \(displayName) has no key for "
                                + "U+\(String(missing.value, radix: 16, uppercase: true)) and no spare keycode to bind it to",
                            hint: "use --sink clipboard for text outside the keyboard layout", scope: .session)
        }
        func tap(_ keycode: Int) {
            _ = lib.testFakeKeyEvent(display, UInt32(keycode), 1, 0)
            _ = lib.testFakeKeyEvent(display, UInt32(keycode), 0, 0)
        }
        if let capsKey { tap(capsKey) }
        defer {
            if let capsKey { tap(capsKey) }
            _ = lib.sync(display, 0)
        }
        let clock = ContinuousClock()
        let windows = XWindows(lib: lib, connection: connection)
        /// The focus moved away from `window`, or the deadline passed: the caller stops there.
        func shouldStop() -> Bool {
            if let deadline, clock.now >= deadline { return true }
            guard let window else { return false }
            _ = lib.sync(display, 0)  // the keys so far reached the window before the focus is looked at
            return windows.focused()?.id != window
        }
        for (index, scalar) in text.unicodeScalars.enumerated() where index >= skipping {
            if index > skipping, (index - skipping) % Self.focusCheckInterval == 0, shouldStop() { return index }
            let keysym = KeySymbol.keysym(for: scalar)
            var target: (keycode: Int, shift: Bool)
            // In a second layout group (e.g. "us,ru" switched to ru) a keycode types its group-2 symbols, which the
            // layout lookup does not know: every character then goes through a scratch binding, which has one
            // group only and so types the same whatever group is active.
            if modifiers.group == 0, let found = layout.position(of: keysym, shiftAvailable: shiftKey != nil),
               !scratch.isScratch(found.keycode) {
                target = found
            } else {
                let (keycode, waited) = try bindScratch(keysym, display: display, layout: layout, scratch: &scratch, clock: clock)
                if waited, shouldStop() { return index }
                target = (keycode, false)
            }
            if target.shift, let shiftKey { _ = lib.testFakeKeyEvent(display, UInt32(shiftKey), 1, 0) }
            tap(target.keycode)
            if target.shift, let shiftKey { _ = lib.testFakeKeyEvent(display, UInt32(shiftKey), 0, 0) }
            scratch.used(target.keycode, at: clock.now)
            if isDead(connection) { throw lostConnection }
            typed = index + 1
        }
        return nil
    }

    private func restore(_ slots: [ScratchKeys.Slot], display: OpaquePointer, perKeycode: Int) {
        for slot in slots {
            var row = ScratchKeys.restoreRow(slot, perKeycode: perKeycode)
            _ = lib.changeKeyboardMapping(display, Int32(slot.keycode), Int32(row.count), &row, 1)
        }
    }

    /// The scratch keycode for `keysym`, bound if needed, and whether it had to wait for one.
    private func bindScratch(_ keysym: UInt, display: OpaquePointer, layout: KeyboardLayout, scratch: inout ScratchKeys,
                             clock: ContinuousClock) throws(SinkError) -> (Int, Bool) {
        var waited = false
        while true {
            switch scratch.assign(keysym, now: clock.now) {
            case .bound(let keycode):
                return (keycode, waited)
            case .bind(let keycode):
                var row = layout.binding(for: keysym)
                _ = lib.changeKeyboardMapping(display, Int32(keycode), Int32(row.count), &row, 1)
                return (keycode, waited)
            case .wait(let until):
                _ = lib.sync(display, 0)
                POSIX.sleep(until - clock.now)
                waited = true
            case .unavailable:
                throw SinkError(message: "the keyboard layout of the X server at \(displayName) has no key for "
                                    + "U+\(String(keysym & 0xFF_FFFF, radix: 16, uppercase: true)) and no spare keycode to bind it to",
                                hint: "use --sink clipboard for text outside the keyboard layout")
            }
        }
    }
}

/// A top-level window: its id (a child of the root window) and its title for messages.
struct FocusedWindow: Equatable, Sendable {
    var id: UInt
    var name: String
}
