/// Builds sinks from their specs.
public enum SinkFactory {
    /// Makes the sink for `spec`.
    ///
    /// - `sanitize`: run texts through `OutputSanitizer` (the default; `false` is `--raw`). Applies to stdout,
    ///   FIFO, jsonl (before JSON escaping), transcript and clipboard. The type sink always sanitizes, because its output are
    ///   key presses into whatever window has the focus.
    /// - `environment`: the daemon's environment; picks the clipboard/typing tool (WAYLAND_DISPLAY, DISPLAY,
    ///   PATH) and is passed to those tools.
    ///
    /// Throws when the sink cannot work at all (FIFO path is not a FIFO, no clipboard tool, no display), with a
    /// hint that says what to install or set.
    public static func make(_ spec: SinkSpec, sanitize: Bool, environment: [String: String]) throws(SinkError) -> any Sink {
        switch spec {
        case .stdout:
            return StdoutSink(fd: 1, sanitize: sanitize)
        case .fifo(let path):
            return try FIFOSink(path: path, sanitize: sanitize)
        case .jsonl(let path):
            return try JSONLSink(path: path, sanitize: sanitize)
        case .transcript(let directory):
            return try TranscriptSink(directory: directory, sanitize: sanitize)
        case .clipboard(let primary):
            let backend = try ClipboardBackend.choose(environment: environment)
            return try ClipboardSink(backend: backend, primary: primary, sanitize: sanitize, environment: environment)
        case .type(let pressEnter):
            let backend = try TypeBackend.choose(environment: environment)
            return try TypeSink(backend: backend, pressEnter: pressEnter, environment: environment)
        }
    }
}
