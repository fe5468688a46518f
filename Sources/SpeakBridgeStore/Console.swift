#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeProtocol

/// Messages for people go to stderr as `speakbridge: …`, `speakbridge: error: …`, `speakbridge: hint: …`
/// (lowercase, no trailing period); stdout carries only the payload. Thread-safe (one write(2) per call).
///
/// Every line given to `info`, `warning` and `error` is passed through `PeerText.escape` whole, whoever built it:
/// a peer-chosen name or message inside it can neither start a new line (no forged `speakbridge: …` line) nor
/// reach the terminal or the journal as an escape sequence. One call is one line, always.
public enum Console {
    public static func info(_ text: String) { emit("speakbridge: " + text) }
    public static func warning(_ text: String) { emit("speakbridge: warning: " + text) }
    public static func error(_ text: String, hint: String? = nil) {
        emit("speakbridge: error: " + text)
        if let hint { emit("speakbridge: hint: " + hint) }
    }

    /// Raw text to stderr (the terminal QR): only for text this program made itself, never for anything a peer chose.
    public static func raw(_ text: String) {
        let bytes = Array(text.utf8)
        _ = try? FileIO.writeAll(2, bytes, path: "stderr")
    }

    /// Payload to stdout.
    public static func out(_ text: String) {
        _ = try? FileIO.writeAll(1, Array((text + "\n").utf8), path: "stdout")
    }

    static func emit(_ line: String) { raw(PeerText.escape(line) + "\n") }
}
