/// At most `burst` log lines of one kind in `interval` seconds; the others are counted, and the next line shown
/// says how many were not. For the lines a stranger decides the number of (refused pairing attempts, refused
/// connections): each is written on the network thread, so a port scanner or a script opening connections by the
/// thousand slowed every device's delivery through a slow terminal. `status` still counts every one.
/// A value, bounded by its fixed kinds.
struct LogThrottle: Sendable {
    enum Kind: Hashable, Sendable {
        case pairingRefused
        case connectionRefused
    }

    static let interval: Double = 10
    static let burst = 5

    private struct Window: Sendable {
        var start: Double
        var shown: Int
        var hidden: Int
    }

    private var windows: [Kind: Window] = [:]

    /// `line` if it may be shown now (with how many of its kind were not, when some were), else nil.
    mutating func admit(_ kind: Kind, _ line: LogLine, now: Double) -> LogLine? {
        var window = windows[kind] ?? Window(start: now, shown: 0, hidden: 0)
        var hidden = 0
        if now - window.start >= Self.interval || now < window.start {
            hidden = window.hidden
            window = Window(start: now, shown: 0, hidden: 0)
        }
        guard window.shown < Self.burst else {
            window.hidden += 1
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
}
