import SpeakBridgeSupport
internal import CLibWebSockets
#if canImport(Glibc)
import Glibc
#endif

/// Where libwebsockets' own log lines go.
///
/// lws is told to log only errors and warnings. By default each line is written to stderr
/// as `speakbridge: lws: error: …`. A program with its own logging can take the lines over
/// with ``setHandler(_:)``.
public enum WebSocketLog {
    public enum Level: Sendable, Equatable {
        case error
        case warning
    }

    /// Replaces the receiver of lws log lines (process-wide). The handler is called on
    /// whichever thread lws logs from, usually a service thread, so it must not block.
    public static func setHandler(_ handler: @escaping @Sendable (Level, String) -> Void) {
        installHook()
        logState.withLock { $0.handler = LogHandler(receive: handler) }
    }

    /// Puts the stderr handler back.
    public static func resetHandler() {
        logState.withLock { $0.handler = LogHandler(receive: writeToStandardError) }
    }

    /// Sends one line through lws's own logger, so that the whole path (lws → emit hook →
    /// handler) can be checked.
    package static func emitThroughLibrary(_ level: Level, _ message: String) {
        installHook()
        swift_lws_log(level == .error ? LLL_ERR : LLL_WARN, message)
    }

    /// Sets lws's log level and emit hook once per process; lws keeps both in globals.
    static func installHook() {
        _ = hookInstalled
    }

    /// Collects the lines lws logs on the calling thread while `body` runs, for error
    /// messages: lws reports why lws_create_context failed only through its log. The lines
    /// reach the handler only if `forward` says so afterwards, so that a failure is reported
    /// once, in the thrown error.
    static func capturingLines<R>(
        _ body: () -> R, forward: (R) -> Bool
    ) -> (R, [(Level, String)]) {
        installHook()
        let thread = UInt(pthread_self())
        logState.withLock { $0.beginCapture(thread) }
        let result = body()
        let (lines, handler) = logState.withLock { state in (state.endCapture(thread), state.handler) }
        if forward(result) {
            for (level, text) in lines {
                handler.receive(level, text)
            }
        }
        return (result, lines)
    }
}

/// Wraps the handler so that reading it out of the Mutex does not pile up reabstraction
/// thunks (C-LIBRARY-NOTES §6.2).
private struct LogHandler: Sendable {
    let receive: @Sendable (WebSocketLog.Level, String) -> Void
}

private struct LogState: Sendable {
    var handler = LogHandler(receive: writeToStandardError)
    /// Lines being collected per thread (pthread_t) by `capturingLines`: a list, not a `[UInt: …]` dictionary
    /// (a context is created on one thread at a time, and the first `[UInt: …]` of a process cost `send` about
    /// 0.28 M instructions at start, looking up `UInt: Hashable` among every conformance record of the binary).
    var captures: [(thread: UInt, lines: [(WebSocketLog.Level, String)])] = []

    mutating func beginCapture(_ thread: UInt) {
        _ = endCapture(thread)
        captures.append((thread, []))
    }

    mutating func endCapture(_ thread: UInt) -> [(WebSocketLog.Level, String)] {
        guard let index = captures.firstIndex(where: { $0.thread == thread }) else { return [] }
        return captures.remove(at: index).lines
    }

    /// Adds the line to the thread's capture; false if the thread is not capturing.
    mutating func capture(_ thread: UInt, _ line: (WebSocketLog.Level, String)) -> Bool {
        guard let index = captures.firstIndex(where: { $0.thread == thread }) else { return false }
        captures[index].lines.append(line)
        return true
    }
}

private let logState = Locked(LogState())

private let hookInstalled: Void = {
    lws_set_log_level(LLL_ERR | LLL_WARN, lwsEmit)
}()

/// The emit hook lws calls for each line; file-level so that it captures nothing and is
/// nonisolated (C-LIBRARY-NOTES §1 pitfalls 9 and 10).
private func lwsEmit(_ level: Int32, _ line: UnsafePointer<CChar>?) {
    guard let line else { return }
    var text = String(cString: line)
    while let last = text.last, last.isNewline || last == " " {
        text.removeLast()
    }
    let mapped: WebSocketLog.Level = (level & LLL_ERR) != 0 ? .error : .warning
    let thread = UInt(pthread_self())
    let handler = logState.withLock { state -> LogHandler? in
        state.capture(thread, (mapped, text)) ? nil : state.handler
    }
    handler?.receive(mapped, text)
}

@Sendable private func writeToStandardError(_ level: WebSocketLog.Level, _ text: String) {
    // write(2) rather than the C `stderr` global, which Swift 6 rejects as not concurrency-safe.
    let line = "speakbridge: lws: \(level == .error ? "error" : "warning"): \(text)\n"
    var bytes = Array(line.utf8)
    bytes.withUnsafeMutableBytes { raw in
        var offset = 0
        while offset < raw.count {
            let n = write(2, raw.baseAddress! + offset, raw.count - offset)
            if n <= 0 { break }
            offset += n
        }
    }
}
