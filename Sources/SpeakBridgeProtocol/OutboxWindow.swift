/// The client's sending rule for one session, as a value: which unacknowledged chunks go out next.
///
/// The client holds every chunk until the desktop acknowledges it (`Outbox` keeps them on disk as well).
/// On each new connection it asks `resume`, drops what the desktop already has, and resends the rest
/// in order. At most `maxInFlight` chunks are unacknowledged on the wire; consecutive chunks are batched
/// into one `chunks` message that fits one frame. `tick(now:)` reports a stalled connection (no ack
/// progress for `ackTimeout` seconds while chunks are in flight) so the caller reconnects.
public struct OutboxWindow: Sendable {
    public let session: String
    public let maxInFlight: Int
    public let ackTimeout: Double
    /// Unacknowledged chunks, ascending by sequence number.
    public private(set) var pending: [Chunk]
    /// Index in `pending` of the first chunk not yet sent on this connection; nil while not resumed.
    var nextToSend: Int?
    public private(set) var acked: UInt64
    var lastProgress: Double = 0

    /// Plaintext budget for one frame's JSON (the frame adds a 16-byte tag; keep room for the envelope).
    static let frameBudget = SpeakBridgeProtocol.maxFrameSize - 1_024

    public init(session: String, pending: [Chunk], acked: UInt64 = 0, maxInFlight: Int = 4_096, ackTimeout: Double = 15) {
        self.session = session
        self.pending = pending.filter { $0.seq > acked }
        self.acked = acked
        self.maxInFlight = maxInFlight
        self.ackTimeout = ackTimeout
    }

    public var isDrained: Bool { pending.isEmpty }
    public var isResumed: Bool { nextToSend != nil }
    var inFlight: Int { nextToSend ?? 0 }

    /// A new connection is up: nothing is in flight on it until the desktop answers `resume`.
    public mutating func connectionLost() { nextToSend = nil }

    /// The desktop's answer to `resume`.
    public mutating func resumed(delivered: UInt64, now: Double) -> [Message] {
        dropThrough(delivered)
        nextToSend = 0
        lastProgress = now
        return nextMessages()
    }

    /// A new chunk from the producer (already journaled by the caller).
    public mutating func append(_ chunk: Chunk) -> [Message] {
        precondition(pending.last.map { chunk.seq > $0.seq } ?? (chunk.seq > acked), "sequence numbers must increase")
        pending.append(chunk)
        return nextMessages()
    }

    public mutating func ack(_ seq: UInt64, now: Double) -> [Message] {
        if seq > acked { lastProgress = now }
        dropThrough(seq)
        return nextMessages()
    }

    /// True when chunks are in flight and no ack progress came for `ackTimeout` seconds.
    public func isStalled(now: Double) -> Bool {
        guard let next = nextToSend, next > 0 else { return false }
        return now - lastProgress > ackTimeout
    }

    mutating func dropThrough(_ seq: UInt64) {
        guard seq > acked else { return }
        acked = seq
        let count = pending.prefix { $0.seq <= seq }.count
        pending.removeFirst(count)
        if let next = nextToSend { nextToSend = max(0, next - count) }
    }

    mutating func nextMessages() -> [Message] {
        guard var next = nextToSend else { return [] }
        var messages: [Message] = []
        while next < pending.count, next < maxInFlight {
            var batch: [Chunk] = []
            var size = 64 + session.utf8.count
            while next < pending.count, next < maxInFlight, batch.count < SpeakBridgeProtocol.maxChunksPerBatch {
                let chunk = pending[next]
                let cost = MessageCodec.encodedSizeBound(chunk) + 1
                if !batch.isEmpty, size + cost > Self.frameBudget { break }
                batch.append(chunk)
                size += cost
                next += 1
            }
            messages.append(batch.count == 1 ? .chunk(session: session, batch[0]) : .chunks(session: session, batch))
        }
        nextToSend = next
        return messages
    }
}
