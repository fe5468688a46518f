internal import Glibc
internal import SpeakBridgeSupport

/// Writes each text and "\n" to a file descriptor: the daemon's standard output (fd 1) or, for tests, any fd.
///
/// - Writes block (this sink runs on its own thread): a slow reader slows the sink, it never loses text.
///   Partial writes and EINTR are handled; if the fd was set non-blocking by someone else, EAGAIN waits with poll.
/// - Writes are at most PIPE_BUF bytes and end at text boundaries where possible, so on a pipe each write is
///   atomic and `willComplete(k)` is called right before the write that completes text k.
/// - EPIPE (the reader went away, e.g. `speakbridge serve | head`) throws a `SinkError` with the texts fully
///   written; the sink stays broken after that (`health` says so). SIGPIPE is suppressed during writes.
/// - `close` does not close the descriptor: the caller owns it.
public final class StdoutSink: TextSink {
    public let label: String
    private let fd: Int32
    private let sanitize: Bool
    private struct State: Sendable {
        var closed = false
        var broken: String?
    }
    private let state = Locked(State())

    /// - Parameters:
    ///   - fd: descriptor to write to; 1 for the daemon's stdout. Not closed by the sink.
    ///   - sanitize: run texts through `OutputSanitizer` (false = `--raw`).
    public init(fd: Int32 = 1, sanitize: Bool = true, label: String = "stdout") {
        self.fd = fd
        self.sanitize = sanitize
        self.label = label
    }

    public var health: String? {
        let current = state.withLock { $0 }
        if current.closed { return "\(label) sink is closed" }
        if let broken = current.broken { return broken }
        let events = POSIX.poll(fd, events: Int16(POLLOUT), timeout: .zero)
        return reason(forPollEvents: events)
    }

    public func waitUntilReady(timeout: Duration) -> String? {
        let current = state.withLock { $0 }
        if current.closed { return "\(label) sink is closed" }
        if let broken = current.broken { return broken }
        return reason(forPollEvents: POSIX.poll(fd, events: Int16(POLLOUT), timeout: timeout))
    }

    private func reason(forPollEvents events: Int16) -> String? {
        if events & Int16(POLLNVAL) != 0 { return "\(label) is not open" }
        if events & Int16(POLLERR) != 0 { return "the reader of \(label) went away" }
        if events & Int16(POLLOUT) != 0 { return nil }
        return "\(label) is not accepting data: its reader is not keeping up"
    }

    public func deliver(_ texts: [String], willComplete: (Int) throws -> Void) throws(SinkError) {
        let current = state.withLock { $0 }
        if current.closed { throw SinkError(message: "\(label) sink is closed") }
        if let broken = current.broken { throw SinkError(message: broken) }
        let plan = LineFraming.plan(texts, sanitize: sanitize, limit: Int(PIPE_BUF))
        try POSIX.suppressingSIGPIPE { () throws(SinkError) in try write(plan, willComplete: willComplete) }
    }

    private func write(_ plan: ChunkPlan, willComplete: (Int) throws -> Void) throws(SinkError) {
        var position = 0
        var reported = 0
        while position < plan.stream.count {
            let (range, completes) = plan.chunk(from: position)
            if completes > reported {
                do { try willComplete(completes) } catch {
                    throw SinkError(delivered: plan.completed(at: position), message: "could not record progress: \(error)")
                }
                reported = completes
            }
            while position < range.upperBound {
                let written = plan.stream.withUnsafeBytes { bytes in
                    Glibc.write(fd, bytes.baseAddress! + position, range.upperBound - position)
                }
                if written > 0 {
                    position += written
                    continue
                }
                let err = written < 0 ? errno : EIO
                switch err {
                case EINTR:
                    continue
                case EAGAIN:
                    _ = POSIX.poll(fd, events: Int16(POLLOUT), timeout: .seconds(1))
                case EPIPE:
                    let message = "the reader of \(label) went away"
                    state.withLock { $0.broken = message }
                    throw SinkError(delivered: plan.completed(at: position), message: message,
                                    hint: "restart the pipeline that reads the daemon's output")
                default:
                    throw SinkError(delivered: plan.completed(at: position),
                                    message: "writing to \(label) failed: \(POSIX.describe(err))")
                }
            }
        }
    }

    public func close() {
        state.withLock { $0.closed = true }
    }
}
