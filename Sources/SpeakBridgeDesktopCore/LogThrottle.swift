/// At most `burst` log lines of one kind in `interval` seconds; the others are counted. For the lines a stranger
/// decides the number of (refused pairing attempts, refused connections): each is written on the network thread, so
/// a port scanner or a script opening connections by the thousand slowed every device's delivery through a slow
/// terminal. `status` still counts every one.
///
/// The count of what was not shown is said once its window ends: by the next line of its kind (appended to it), or
/// — when none comes — by `flush` at `deadline`, which the core makes its `nextDeadline`, so a flood that stops is
/// still reported within a moment of its window's end, not at some later refusal (or never).
/// A value, bounded by its fixed kinds.
struct LogThrottle: Sendable {
    enum Kind: Hashable, Sendable, CaseIterable {
        case pairingRefused
        case connectionRefused

        /// What the lines of this kind are, for the line that counts the hidden ones.
        var plural: String {
            switch self {
            case .pairingRefused: "refused pairing attempts"
            case .connectionRefused: "refused connections"
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
        var lines: [LogLine] = []
        for kind in Kind.allCases {
            guard let window = windows[kind], window.hidden > 0, Self.ended(window, now: now) else { continue }
            lines.append(LogLine(window.level, "\(window.hidden) more \(kind.plural) in the \(Int(Self.interval)) s "
                                 + "before, not shown"))
            windows[kind] = nil
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
