import SpeakBridgeProtocol

/// `jsonl:PATH`: a framed FIFO. Every chunk is one `JSONLine` (device, name, session, seq, text and the optional
/// fields), so a reader can tell chunks apart and drop one it has already seen.
///
/// The FIFO itself follows every rule of `FIFOSink` (created 0600 in a directory that is ours, never a symlink,
/// another user's FIFO or one open to others refused, the write end checked again after opening, writes of at
/// most 4096 bytes that never block, a pipe kept open across readers): it *is* a `FIFOSink` under another label,
/// fed with JSON lines instead of raw lines.
///
/// Class (b), `DeliveryClass.recordAfterWrite`: progress is recorded right after each write, so a crash of the
/// desktop between a write and its record repeats that write's lines after the restart, and loses nothing. A
/// reader keeps, per (device, session), the highest seq it has used and drops any line at or below it.
public final class JSONLSink: Sink {
    public var label: String { pipe.label }
    public var path: String { pipe.path }
    private let pipe: FIFOSink
    private let sanitize: Bool

    /// Creates the FIFO at `path` (mode 0600) unless it exists; does not open it yet.
    /// - Parameter sanitize: run texts through `OutputSanitizer` before escaping (false = `--raw`).
    public init(path: String, sanitize: Bool = true) throws(SinkError) {
        pipe = try FIFOSink(path: path, sanitize: sanitize, label: "jsonl:\(path)")
        self.sanitize = sanitize
    }

    public var deliveryClass: DeliveryClass { .recordAfterWrite }
    public var health: String? { pipe.health }
    public func waitUntilReady(timeout: Duration) -> String? { pipe.waitUntilReady(timeout: timeout) }

    public func deliver(_ items: [SinkItem], willWrite: (Int) throws -> Void,
                        didWrite: (Int) -> Void) throws(SinkError) {
        try pipe.write(items.map { JSONLine.encode($0, sanitize: sanitize) }, willWrite: willWrite, didWrite: didWrite)
    }

    public func close() { pipe.close() }
}
