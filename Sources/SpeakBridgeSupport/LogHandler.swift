#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization

/// The program's one swift-log handler: every `Logger` of the process (the `Console` facade's and any made after
/// `LoggingSystem.bootstrap` in main) writes through it to stderr.
///
/// A record becomes one line, `speakbridge: [debug: |warning: |error: ]MESSAGE`, plus `speakbridge: hint: HINT`
/// when the record carries the `hint` metadata key; both lines go out in one write(2), so threads never interleave
/// inside a record. The message, every metadata value and the hint pass through `PeerText.escape`: whoever built
/// the text, a peer-chosen part can neither start a forged line nor reach the terminal or the journal as an escape
/// sequence. Decoration depends on where stderr goes (decided once, see `Style`):
/// - the journal (JOURNAL_STREAM names stderr's device and inode, as systemd documents it): each line starts with
///   the sd-daemon priority, `<3>` error, `<4>` warning, `<6>` info, `<7>` debug; no colour.
/// - a terminal (and NO_COLOR unset, TERM not "dumb"): the `error:`/`warning:`/`hint:`/`debug:` labels in colour.
/// - anything else (a file, a pipe): plain text, nothing else.
public struct SpeakBridgeLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    /// A level set on this handler's own logger; without one the program-wide threshold applies.
    private var ownLevel: Logger.Level?

    public init(label: String) {}

    /// The program-wide threshold (index into `Logger.Level.allCases`), set once from `--verbose`/`--quiet`.
    /// swift-log allows such a global override; it lets the `Console` logger, created before main parses the
    /// flags, follow them.
    private static let threshold = Atomic<Int>(2)  // .info

    public static var programLevel: Logger.Level {
        // Not through `Logger.Level.allCases`: that builds an array on every read (about 290 instructions per
        // `Console.debug` call with debug off, once per delivered line).
        get { Self.level(at: threshold.load(ordering: .relaxed)) }
        set { threshold.store(Self.index(of: newValue), ordering: .relaxed) }
    }

    /// Whether `Console.debug` lines are written: one atomic load, nothing allocated.
    public static var debugEnabled: Bool { threshold.load(ordering: .relaxed) <= index(of: .debug) }

    /// The level's place in `Logger.Level.allCases` (checked against it by a test).
    static func index(of level: Logger.Level) -> Int {
        switch level {
        case .trace: 0
        case .debug: 1
        case .info: 2
        case .notice: 3
        case .warning: 4
        case .error: 5
        case .critical: 6
        }
    }

    static func level(at index: Int) -> Logger.Level {
        switch index {
        case ...0: .trace
        case 1: .debug
        case 2: .info
        case 3: .notice
        case 4: .warning
        case 5: .error
        default: .critical
        }
    }

    public var logLevel: Logger.Level {
        get { ownLevel ?? Self.programLevel }
        set { ownLevel = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
        if let given = event.metadata { all.merge(given) { $1 } }
        let hint = all.removeValue(forKey: "hint").map { "\($0)" }
        let text = Self.format(level: event.level, message: event.message.description, metadata: all, hint: hint,
                               style: Self.style)
        StandardStream.write(STDERR_FILENO, Array(text.utf8))
    }

    // MARK: - Formatting

    /// How lines are decorated; see the type's comment.
    public struct Style: Sendable, Equatable {
        public var journal: Bool
        public var colour: Bool

        public init(journal: Bool, colour: Bool) {
            self.journal = journal
            self.colour = colour
        }

        /// For stderr of this process: journal when JOURNAL_STREAM is "DEV:INODE" of fd 2 (systemd sets it when it
        /// connects stderr to the journal; a child writing elsewhere inherits the variable but not the match).
        static func detect(environment: (String) -> String? = { getenv($0).map { String(cString: $0) } }) -> Style {
            var info = stat()
            guard fstat(STDERR_FILENO, &info) == 0 else { return Style(journal: false, colour: false) }
            if let stream = environment("JOURNAL_STREAM"), stream == "\(info.st_dev):\(info.st_ino)" {
                return Style(journal: true, colour: false)
            }
            let colour = isatty(STDERR_FILENO) == 1 && (environment("NO_COLOR") ?? "").isEmpty
                && environment("TERM") != "dumb"
            return Style(journal: false, colour: colour)
        }
    }

    static let style = Style.detect()

    /// The bytes written for one record (lines end in "\n").
    public static func format(level: Logger.Level, message: String, metadata: Logger.Metadata, hint: String?,
                              style: Style) -> String {
        var body = PeerText.escape(message)
        if !metadata.isEmpty {
            let pairs = metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            body += " (" + PeerText.escape(pairs.joined(separator: ", ")) + ")"
        }
        var text = line(priority: priority(level), label: label(level), body: body, style: style)
        if let hint {
            text += line(priority: priority(level), label: "hint", body: PeerText.escape(hint), style: style)
        }
        return text
    }

    private static func line(priority: Int, label: String?, body: String, style: Style) -> String {
        let prefix = style.journal ? "<\(priority)>" : ""
        guard let label else { return prefix + "speakbridge: " + body + "\n" }
        let shown = style.colour ? colour(label) + label + ":\u{1B}[0m" : label + ":"
        return prefix + "speakbridge: " + shown + " " + body + "\n"
    }

    /// sd-daemon(3) priorities.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    private static func label(_ level: Logger.Level) -> String? {
        switch level {
        case .trace, .debug: "debug"
        case .info, .notice: nil
        case .warning: "warning"
        case .error, .critical: "error"
        }
    }

    private static func colour(_ label: String) -> String {
        switch label {
        case "error": "\u{1B}[1;31m"
        case "warning": "\u{1B}[1;33m"
        case "hint": "\u{1B}[1;36m"
        default: "\u{1B}[2m"
        }
    }
}
