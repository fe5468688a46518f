/// How the pipeline's committer paces the progress log's fsyncs (group commit), as a value.
///
/// The rule: an advance that arrives when the last fsync started at least `interval` ago is fsynced at once (a
/// quiet desktop, a one-shot `send --text`: no added delay). One that arrives sooner waits until `interval` after
/// that fsync's start, gathering every advance that comes meanwhile into one fsync — unless the chunks waiting
/// reach `flushAt` first (a burst), the advance carries the first chunks of a connection (`submit(urgent:)`: a
/// one-shot `send --text` that follows another within the interval waits for that ack to exit), or the pipeline
/// stops: then at once. An ack still goes out only after the fsync that covers it; pacing only decides how many
/// advances one fsync covers.
///
/// Why 25 ms: paced at 2 ms, every line had its own fsync (0.98 per line, 40–170 µs of CPU each on the bench VM).
/// Paired runs of the bench (4 pairs each, 2 ms pace): desktop CPU per line 244 µs unpaced → 187 (5 ms), 145–152
/// (10 ms), 102–104 (25 ms); the burst and the latency to the FIFO did not move. At most 40 fsyncs a second whatever
/// the line rate. The ack is not what a user sees (the text is on the sink before the fsync); it only lets the
/// client drop its journaled copy, so 25 ms more is small beside the client's own journal fsync window (50 ms) and
/// its 15 s ack stall. A one-shot `send --text`, which waits for its ack, opens a connection for it, and a
/// connection's first chunks are urgent; a streaming `send` at the end of its input waits at most 25 ms more for
/// its last ack. Why 1,024 chunks: a quarter of the reference client's window as it was (4,096 chunks; 16,384
/// since the seventeenth performance session), so a fast sender is never held by the wait.
public struct CommitPacing: Sendable, Equatable {
    /// Least time between the starts of two fsyncs while advances keep coming (nanoseconds).
    public var intervalNanoseconds: UInt64
    /// Chunks waiting for the fsync that end the wait at once.
    public var flushAt: UInt64

    public init(intervalNanoseconds: UInt64, flushAt: UInt64) {
        self.intervalNanoseconds = intervalNanoseconds
        self.flushAt = flushAt
    }

    /// The reference desktop's values.
    public static let desktop = CommitPacing(intervalNanoseconds: 25_000_000, flushAt: 1_024)
    /// Every advance fsynced as soon as the committer is free (the behaviour before pacing).
    public static let none = CommitPacing(intervalNanoseconds: 0, flushAt: 1)
}
