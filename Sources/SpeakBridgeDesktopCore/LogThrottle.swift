import SpeakBridgeProtocol

/// At most `burst` log lines of one kind in `interval` seconds; the others are counted. For the lines a stranger
/// decides the number of (refused pairing attempts, refused connections), and those a paired device does (the
/// closes of its connections, one kind per device, so one device's loop hides no other device's lines): each is
/// written on the network thread, so a port scanner or a script opening connections by the thousand slowed every
/// device's delivery through a slow terminal, and filled a log file or journald's rate limit (which then drops
/// the lines that matter). `status` still counts every one.
///
/// The count of what was not shown is said once its window ends: by the next line of its kind (appended to it), or
/// — when none comes — by `flush` at `deadline`, which the core makes its `nextDeadline`, so a flood that stops is
/// still reported within a moment of its window's end, not at some later refusal (or never).
/// A value, bounded by its kinds: two, and one per paired device that closed a connection in the last `interval`
/// (an ended window is dropped at the next `flush`).
struct LogThrottle: Sendable {
    enum Kind: Hashable, Sendable {
        case pairingRefused
        case connectionRefused
        /// The closes of one paired device's connections (its key proved): it decides how many it opens.
        case device(DeviceID)

        /// What the lines of this kind are, for the line that counts the hidden ones.
        var plural: String {
            switch self {
            case .pairingRefused: "refused pairing attempts"
            case .connectionRefused: "refused connections"
            case .device(let device): "closed connections of \(device)"
            }
        }
    }

    static let interval: Double = 10
    static let burst = 5

    private struct Window: Sendable {
        var start: Double
        var shown: Int
        var hidden: Int
        /// The level of the lines hidden (the counting line has it too).
        var level: LogLine.Level
    }

    private var windows: [Kind: Window] = [:]
    /// The earliest end of a window that hid lines (nil: none did): when `flush` has something to say. Stored,
    /// not computed: the core's `nextDeadline` is read after every event, every chunk included.
    private(set) var deadline: Double?

    /// `line` if it may be shown now (with how many of its kind were not, when some were), else nil.
    mutating func admit(_ kind: Kind, _ line: LogLine, now: Double) -> LogLine? {
        var window = windows[kind] ?? Window(start: now, shown: 0, hidden: 0, level: line.level)
        var hidden = 0
        if Self.ended(window, now: now) {
            hidden = window.hidden
            window = Window(start: now, shown: 0, hidden: 0, level: line.level)
        }
        defer { updateDeadline() }
        guard window.shown < Self.burst else {
            window.hidden += 1
            window.level = line.level
            windows[kind] = window
            return nil
        }
        window.shown += 1
        windows[kind] = window
        guard hidden > 0 else { return line }
        var shown = line
        shown.message += " (and \(hidden) more like it in the \(Int(Self.interval)) s before, not shown)"
        return shown
    }

    /// One line per kind whose window has ended with lines hidden, counting them (in `Kind` order); those windows
    /// are closed. Nothing while `deadline` is nil.
    mutating func flush(now: Double) -> [LogLine] {
        guard deadline != nil else { return [] }
        // The windows that ended, earliest first (then by name, so the order does not depend on hashing). Every
        // ended window is dropped, counted or not: what stays is one window per kind seen in the last 10 s.
        let ended = windows.filter { Self.ended($0.value, now: now) }
            .sorted { ($0.value.start, $0.key.plural) < ($1.value.start, $1.key.plural) }
        var lines: [LogLine] = []
        for (kind, window) in ended {
            windows[kind] = nil
            guard window.hidden > 0 else { continue }
            lines.append(LogLine(window.level, "\(window.hidden) more \(kind.plural) in the \(Int(Self.interval)) s "
                                 + "before, not shown"))
        }
        updateDeadline()
        return lines
    }

    /// The window is over (or the clock went back past its start).
    private static func ended(_ window: Window, now: Double) -> Bool {
        now - window.start >= interval || now < window.start
    }

    private mutating func updateDeadline() {
        deadline = windows.values.filter { $0.hidden > 0 }.map { $0.start + Self.interval }.min()
    }
}
