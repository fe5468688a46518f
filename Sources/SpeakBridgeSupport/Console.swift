#if canImport(Glibc)
import Glibc
#endif
import Logging

/// Messages for people go to stderr as `speakbridge: …`, `speakbridge: warning: …`, `speakbridge: error: …` +
/// `speakbridge: hint: …` (lowercase, no trailing period); stdout carries only the payload.
///
/// A thin facade over the program's one swift-log `Logger`, written by `SpeakBridgeLogHandler` (format, journald
/// priorities, colour only on a terminal). Every line given to `debug`, `info`, `warning` and `error` is passed
/// through `PeerText.escape` whole, whoever built it: a peer-chosen name or message inside it can neither start a
/// new line (no forged `speakbridge: …` line) nor reach the terminal or the journal as an escape sequence. One call
/// is one record, written with one write(2).
public enum Console {
    /// How much is logged: `--quiet` warnings and errors only, `--verbose` debug lines too.
    public enum Verbosity: Sendable {
        case quiet, normal, verbose
    }

    /// The program's logger. Made with the handler explicitly, so it writes the same lines whether or not (or
    /// before) main bootstrapped the logging system.
    public static let logger = Logger(label: "speakbridge") { SpeakBridgeLogHandler(label: $0) }

    /// Called once by main after parsing: sets the level and makes every other `Logger` in the process use
    /// the same handler.
    /// `--quiet` was given: only warnings and errors are shown (and no live status line is drawn).
    public static var isQuiet: Bool { SpeakBridgeLogHandler.programLevel > .info }

    public static func bootstrap(_ verbosity: Verbosity) {
        SpeakBridgeLogHandler.programLevel = switch verbosity {
        case .quiet: .warning
        case .normal: .info
        case .verbose: .debug
        }
        LoggingSystem.bootstrap { SpeakBridgeLogHandler(label: $0) }
    }

    /// With debug off (the usual case) one atomic load: the message is not built and swift-log is not entered.
    /// `logger` has no level of its own (a `let` whose handler follows `programLevel`), so this is the same test
    /// `logger.debug` makes.
    public static func debug(_ text: @autoclosure () -> String) {
        guard SpeakBridgeLogHandler.debugEnabled else { return }
        logger.debug("\(text())")
    }
    public static func info(_ text: String) { logger.info("\(text)") }
    public static func warning(_ text: String) { logger.warning("\(text)") }
    public static func error(_ text: String, hint: String? = nil) {
        logger.error("\(text)", metadata: hint.map { ["hint": .string($0)] })
    }

    /// Raw text to stderr (the terminal QR): only for text this program made itself, never for anything a peer
    /// chose, and never a log record (it bypasses levels and journald priorities on purpose).
    public static func raw(_ text: String) {
        let bytes = Array(text.utf8)
        StandardStream.write(2, bytes)
    }

    /// Payload to stdout.
    public static func out(_ text: String) {
        StandardStream.write(1, Array((text + "\n").utf8))
    }
}
