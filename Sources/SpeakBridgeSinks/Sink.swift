/// A place where received transcript text goes: stdout, a FIFO, the clipboard, keystrokes.
///
/// Threading: each sink is driven by one dedicated thread of the daemon, which calls `waitUntilReady` and
/// `deliver` in a loop. Both may block that thread (`waitUntilReady` at most `timeout`; `deliver` of the stdout
/// sink as long as the reader does not read; the tool-based sinks at most the tool timeout). `health` and `close`
/// may be called from any thread.
///
/// Exactly-once contract: `deliver` calls `willComplete(k)` immediately before the one write syscall or tool
/// invocation that completes `texts[k-1]` (k is cumulative within the call and may jump by more than one when a
/// single write carries several texts). If that write then fails, the thrown `SinkError.delivered` is the truth:
/// it counts texts that were fully handed over, and may be smaller than the last `k` passed to `willComplete`.
public protocol Sink: AnyObject, Sendable {
    /// "stdout", "fifo:/path", "clipboard", "clipboard:primary", "type", "type:enter".
    var label: String { get }
    /// nil when the sink could accept a write now; otherwise why not (for `status`).
    var health: String? { get }
    /// Blocks the calling (dedicated sink) thread at most `timeout` until a write can proceed without blocking;
    /// returns nil when ready, else the reason ("no reader on FIFO /run/x: open it with `cat /run/x`").
    func waitUntilReady(timeout: Duration) -> String?
    /// Delivers `texts` in order; see the type's documentation for the `willComplete` contract.
    func deliver(_ texts: [String], willComplete: (Int) throws -> Void) throws(SinkError)
    /// Releases the sink's resources. Later calls to `deliver` fail; `close` itself is idempotent.
    func close()
}

/// A sink failure. `delivered` counts the texts of the failed `deliver` call that were fully written before the
/// failure; the daemon resumes from there.
public struct SinkError: Error, CustomStringConvertible, Sendable, Equatable {
    /// Texts fully written before the failure (0 for errors outside `deliver`).
    public var delivered: Int
    /// What went wrong, lowercase, without trailing period; never contains transcript text.
    public var message: String
    /// What the user can do about it, if anything.
    public var hint: String?

    public init(delivered: Int = 0, message: String, hint: String? = nil) {
        self.delivered = delivered
        self.message = message
        self.hint = hint
    }

    public var description: String { message }
}
