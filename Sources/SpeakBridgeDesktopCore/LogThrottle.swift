import SpeakBridgeProtocol
import SpeakBridgeSupport

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
/// A value over `LogBudget`, bounded by its kinds: two, and one per paired device that closed a connection in the
/// last `interval`.
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

        /// The level of its lines (and of the line that counts the hidden ones).
        var level: LogLine.Level { self == .pairingRefused ? .warning : .info }
    }

    static let interval: Double = 10
    static let burst = 5

    private var budget = LogBudget<Kind>(interval: interval, burst: burst)
    /// The earliest end of a window that hid lines (nil: none did): when `flush` has something to say.
    var deadline: Double? { budget.deadline }

    /// `line` if it may be shown now (with how many of its kind were not, when some were), else nil.
    mutating func admit(_ kind: Kind, _ line: LogLine, now: Double) -> LogLine? {
        guard let hidden = budget.admit(kind, now: now) else { return nil }
        guard hidden > 0 else { return line }
        var shown = line
        shown.message += " (and \(hidden) more like it in the \(Int(Self.interval)) s before, not shown)"
        return shown
    }

    /// One line per kind whose window has ended with lines hidden, counting them (earliest window first, then by
    /// name, so the order does not depend on hashing); those windows are closed. Nothing while `deadline` is nil.
    mutating func flush(now: Double) -> [LogLine] {
        budget.flush(now: now)
            .sorted { ($0.start, $0.key.plural) < ($1.start, $1.key.plural) }
            .map { LogLine($0.key.level, "\($0.hidden) more \($0.key.plural) in the \(Int(Self.interval)) s before, not shown") }
    }
}
