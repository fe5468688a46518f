/// At most `burst` log lines of one key in `interval` seconds; the others are counted and said once their window
/// ends: by the next line of that key (`admit` tells how many were hidden before it), or by `flush` at `deadline`
/// for a caller that has a clock to wake it. For lines someone else decides the number of — a stranger's refused
/// connections, a paired device's, another local user's tries at the control socket: every line is a write to a
/// terminal, a file or the journal (whose rate limit then drops the lines that matter).
///
/// A value; bounded by its keys: a window is kept per key seen in the last `interval` (an ended window is dropped
/// by `flush`, or replaced by the key's next line).
public struct LogBudget<Key: Hashable & Sendable>: Sendable {
    public let interval: Double
    public let burst: Int

    private struct Window: Sendable {
        var start: Double
        var shown: Int
        var hidden: Int
    }

    private var windows: [Key: Window] = [:]
    /// The earliest end of a window that hid lines (nil: none did): when `flush` has something to say. Stored, not
    /// computed, for callers that read it after every event.
    public private(set) var deadline: Double?

    public init(interval: Double = 10, burst: Int) {
        self.interval = interval
        self.burst = burst
    }

    /// Nil: this line is not shown (it is counted). Else it may be shown, and this is how many lines of its key
    /// were hidden in the window that ended before it (0: none, or they were said by `flush`).
    public mutating func admit(_ key: Key, now: Double) -> Int? {
        var window = windows[key] ?? Window(start: now, shown: 0, hidden: 0)
        var hidden = 0
        if ended(window, now: now) {
            hidden = window.hidden
            window = Window(start: now, shown: 0, hidden: 0)
        }
        defer { updateDeadline() }
        guard window.shown < burst else {
            window.hidden += 1
            windows[key] = window
            return nil
        }
        window.shown += 1
        windows[key] = window
        return hidden
    }

    /// The keys whose window has ended with lines hidden, with how many, earliest window first (ties in no set
    /// order); every ended window is dropped. Nothing while `deadline` is nil.
    public mutating func flush(now: Double) -> [(key: Key, hidden: Int, start: Double)] {
        guard deadline != nil else { return [] }
        let over = windows.filter { ended($0.value, now: now) }
        var out: [(key: Key, hidden: Int, start: Double)] = []
        for (key, window) in over {
            windows[key] = nil
            if window.hidden > 0 { out.append((key, window.hidden, window.start)) }
        }
        updateDeadline()
        return out.sorted { $0.start < $1.start }
    }

    /// The window is over (or the clock went back past its start).
    private func ended(_ window: Window, now: Double) -> Bool {
        now - window.start >= interval || now < window.start
    }

    private mutating func updateDeadline() {
        deadline = windows.values.filter { $0.hidden > 0 }.map { $0.start + interval }.min()
    }
}
