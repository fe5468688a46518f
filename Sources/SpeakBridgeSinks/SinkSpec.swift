/// A sink as the user names it on the command line (`--sink SPEC`).
public enum SinkSpec: Equatable, Sendable, CustomStringConvertible {
    /// `stdout`: each text and "\n" to the daemon's standard output.
    case stdout
    /// `fifo:PATH`: each text and "\n" into a named pipe, created (mode 0600) if absent.
    case fifo(path: String)
    /// `clipboard` / `clipboard:primary`: the X11/Wayland CLIPBOARD or PRIMARY selection.
    case clipboard(primary: Bool)
    /// `type` / `type:enter`: keystrokes into the focused window; Enter only with `type:enter`.
    case type(pressEnter: Bool)

    /// The accepted forms, for error messages and `--help`.
    public static let validForms = "stdout, fifo:PATH, clipboard, clipboard:primary, type, type:enter"

    /// Parses "stdout", "fifo:PATH", "clipboard", "clipboard:primary", "type", "type:enter".
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
                let path = String(text.dropFirst("fifo:".count))
                guard !path.isEmpty else {
                    throw SinkError(message: "sink 'fifo:' needs a path", hint: "write it as fifo:PATH, e.g. fifo:/tmp/dictation")
                }
                guard !path.utf8.contains(0) else {
                    throw SinkError(message: "FIFO path contains a NUL character")
                }
                self = .fifo(path: path)
            } else {
                throw SinkError(message: "unknown sink '\(text)'", hint: "valid sinks: \(Self.validForms)")
            }
        }
    }

    /// The sink's label, which is also its command-line form.
    public var description: String {
        switch self {
        case .stdout: "stdout"
        case .fifo(let path): "fifo:\(path)"
        case .clipboard(let primary): primary ? "clipboard:primary" : "clipboard"
        case .type(let pressEnter): pressEnter ? "type:enter" : "type"
        }
    }
}
