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
    /// Unacknowledged chunks, ascending by sequence number, from `head` on. Acks advance `head` instead of
    /// shifting the array (a burst of 100,000 lines would otherwise move the whole array on every ack);
    /// the acknowledged prefix is dropped once it is both large and more than half of the storage.
    var storage: [Chunk]
    var head = 0
    /// Index in `pending` of the first chunk not yet sent on this connection; nil while not resumed.
    var nextToSend: Int?
    public private(set) var acked: UInt64
    var lastProgress: Double = 0

    /// Plaintext budget for one frame's JSON (the frame adds a 16-byte tag; keep room for the envelope).
    static let frameBudget = SpeakBridgeProtocol.maxFrameSize - 1_024

    public init(session: String, pending: [Chunk], acked: UInt64 = 0, maxInFlight: Int = 4_096, ackTimeout: Double = 15) {
        self.session = session
        self.storage = pending.filter { $0.seq > acked }
        self.acked = acked
        self.maxInFlight = maxInFlight
        self.ackTimeout = ackTimeout
    }

    /// Unacknowledged chunks, ascending (a copy: for reports and tests).
    public var pending: [Chunk] { Array(storage[head...]) }
    public var pendingCount: Int { storage.count - head }
    public var isDrained: Bool { head == storage.count }
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
        append(contentsOf: [chunk])
    }

    /// New chunks from the producer, batched into as few messages as fit.
    public mutating func append(contentsOf chunks: [Chunk]) -> [Message] {
        for chunk in chunks {
            precondition((head < storage.count ? storage.last.map { chunk.seq > $0.seq } : nil) ?? (chunk.seq > acked),
                         "sequence numbers must increase")
            storage.append(chunk)
        }
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
        var count = 0
        while head + count < storage.count, storage[head + count].seq <= seq { count += 1 }
        head += count
        if let next = nextToSend { nextToSend = max(0, next - count) }
        if head > 4_096 && head * 2 > storage.count {
            storage.removeFirst(head)
            head = 0
        }
    }

    mutating func nextMessages() -> [Message] {
        guard var next = nextToSend else { return [] }
        var messages: [Message] = []
        let available = storage.count - head
        while next < available, next < maxInFlight {
            var batch: [Chunk] = []
            var size = 64 + session.utf8.count
            while next < available, next < maxInFlight, batch.count < SpeakBridgeProtocol.maxChunksPerBatch {
                let chunk = storage[head + next]
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
