/// A sink as the user names it on the command line (`--sink SPEC`).
public enum SinkSpec: Equatable, Sendable, CustomStringConvertible {
    /// `stdout`: each text and "\n" to the daemon's standard output.
    case stdout
    /// `fifo:PATH`: each text and "\n" into a named pipe, created (mode 0600) if absent.
    case fifo(path: String)
    /// `jsonl:PATH`: one JSON object per chunk and "\n" into a named pipe, with the `fifo:` rules (`JSONLSink`).
    case jsonl(path: String)
    /// `transcript:DIR`: Markdown + JSONL (+ WebVTT) files per (device, session) in DIR (`TranscriptSink`).
    case transcript(directory: String)
    /// `clipboard` / `clipboard:primary`: the X11/Wayland CLIPBOARD or PRIMARY selection.
    case clipboard(primary: Bool)
    /// `type` / `type:enter`: keystrokes into the focused window; Enter only with `type:enter`.
    case type(pressEnter: Bool)

    /// The accepted forms, for error messages and `--help`.
    public static let validForms = "stdout, fifo:PATH, jsonl:PATH, transcript:DIR, clipboard, clipboard:primary, type, type:enter"

    /// Parses "stdout", "fifo:PATH", "jsonl:PATH", "transcript:DIR", "clipboard", "clipboard:primary", "type", "type:enter".
    /// Throws a `SinkError` whose hint lists the valid forms.
    public init(parsing text: String) throws {
        switch text {
        case "stdout": self = .stdout
        case "clipboard": self = .clipboard(primary: false)
        case "clipboard:primary": self = .clipboard(primary: true)
        case "type": self = .type(pressEnter: false)
        case "type:enter": self = .type(pressEnter: true)
        default:
            if text.hasPrefix("fifo:") {
                self = .fifo(path: try Self.path(of: text, kind: "fifo", example: "/tmp/dictation"))
            } else if text.hasPrefix("jsonl:") {
                self = .jsonl(path: try Self.path(of: text, kind: "jsonl", example: "$XDG_RUNTIME_DIR/speakbridge.jsonl"))
            } else if text.hasPrefix("transcript:") {
                self = .transcript(directory: try Self.path(of: text, kind: "transcript", example: "$HOME/Documents/dictation"))
            } else {
                throw SinkError(message: "unknown sink '\(text)'", hint: "valid sinks: \(Self.validForms)")
            }
        }
    }

    /// The path after `KIND:`, which must be there and hold no NUL.
    private static func path(of text: String, kind: String, example: String) throws -> String {
        let path = String(text.dropFirst(kind.count + 1))
        guard !path.isEmpty else {
            throw SinkError(message: "sink '\(kind):' needs a path", hint: "write it as \(kind):PATH, e.g. \(kind):\(example)")
        }
        guard !path.utf8.contains(0) else {
            throw SinkError(message: "\(kind == "transcript" ? "directory" : "FIFO") path contains a NUL character")
        }
        return path
    }

    /// The sink's label, which is also its command-line form.
    public var description: String {
        switch self {
        case .stdout: "stdout"
        case .fifo(let path): "fifo:\(path)"
        case .jsonl(let path): "jsonl:\(path)"
        case .transcript(let directory): "transcript:\(directory)"
        case .clipboard(let primary): primary ? "clipboard:primary" : "clipboard"
        case .type(let pressEnter): pressEnter ? "type:enter" : "type"
        }
    }
}
