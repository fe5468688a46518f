/// The client's sending rule for one session, as a value: which unacknowledged chunks go out next.
///
/// The client holds every chunk until the desktop acknowledges it (`Outbox` keeps them on disk as well).
/// On each new connection it asks `resume`, drops what the desktop already has, and resends the rest
/// in order. At most `maxInFlight` chunks, and at most `maxInFlightBytes` bytes of their texts (but always one
/// chunk), are unacknowledged on the wire; consecutive chunks are batched
/// into one `chunks` message that fits one frame. `isStalled(now:)` reports a stalled connection (no ack
/// progress for `ackTimeout` seconds while chunks are in flight) so the caller reconnects.
public struct OutboxWindow: Sendable {
    public let session: String
    public let maxInFlight: Int
    /// The most bytes of text in flight (the chunks' `textUTF8Count`): with the chunk bound, what a stalled desktop
    /// can make this process hold in frames it has not written yet, and half the desktop's 16 MiB backlog limit, so
    /// the reference client never reaches it (PROTOCOL.md, "Flow control"). 8 MiB: 16,384 lines of dictation are
    /// about 1 MiB; 16,384 chunks of 16 KiB would be 256 MiB.
    public let maxInFlightBytes: Int
    public let ackTimeout: Double
    /// Unacknowledged chunks, ascending by sequence number (acks drop from the front in amortized O(1) a chunk).
    var storage: ChunkQueue
    /// Index in `storage` of the first chunk not yet sent on this connection; nil while not resumed.
    var nextToSend: Int?
    public private(set) var acked: UInt64
    /// The highest sequence number the window ever held (or `acked`): an ack past it acknowledges
    /// something never sent, and is clamped to it.
    public internal(set) var lastSeq: UInt64
    /// The last chunk held at the start (from the journal: an earlier run may have sent them all): an ack through
    /// it is believed although nothing went out on this run yet.
    let heldAtStart: UInt64
    var lastProgress: Double = 0
    /// Bytes of text of the chunks in flight (`storage[..<nextToSend]`): at most `maxInFlightBytes`, or one chunk
    /// more (a lone chunk always goes, and a paced line goes alone while any room is left: `sendsNextAlone` is
    /// asked before the line's size is known).
    var inFlightBytes = 0
    /// How many chunks at the front of `storage` went out at least once (on any connection): only those after them
    /// can still hold `Chunk.encoded` bytes (sending drops them).
    var sentCount = 0
    /// Bytes of `Chunk.encoded` held by chunks not sent yet, at most `maxEncodedBytes`: past it a new chunk's bytes
    /// are dropped (it is escaped again when it goes out), so a backlog the desktop does not take (away, or slow)
    /// holds its texts and at most this much more.
    var encodedBytes = 0
    let maxEncodedBytes: Int
    /// `MessageCodec.chunkEnvelope(session:)`, written once: a paced line's message starts with it
    /// (`appendAloneEncoded`) instead of escaping the session again (about 360 instructions a line).
    let chunkEnvelope: [UInt8]

    /// Plaintext budget for one frame's JSON (the frame adds a 16-byte tag; keep room for the envelope).
    static let frameBudget = SpeakBridgeProtocol.maxFrameSize - 1_024

    /// What `nextOutgoing` counts for a message's envelope around its chunks.
    static func envelopeSize(sessionBytes: Int) -> Int { 64 + sessionBytes }

    /// The most bytes a chunk's text may take once escaped (`JSONValue.escapedSize`, as
    /// `MessageCodec.encodedSizeBound` counts it) for that chunk, alone in a message of any valid session ID (at most
    /// 64 bytes), to fit `frameBudget` by the rule `nextOutgoing` packs with. A longer one would go alone in a frame
    /// too large to encrypt (16384 controls escape to 98304 bytes), so `send` splits its lines by this as well.
    public static let maxEscapedTextBytes = frameBudget - envelopeSize(sessionBytes: 64)
        - (MessageCodec.encodedSizeBound(Chunk(seq: 1, text: "")) + 1)

    public init(session: String, pending: [Chunk], acked: UInt64 = 0, maxInFlight: Int = Self.defaultMaxInFlight,
                maxInFlightBytes: Int = 8 << 20, ackTimeout: Double = 15, maxEncodedBytes: Int = 16 << 20) {
        self.maxInFlightBytes = maxInFlightBytes
        self.maxEncodedBytes = maxEncodedBytes
        self.session = session
        self.chunkEnvelope = MessageCodec.chunkEnvelope(session: session)
        // Without encoded bytes: `encodedBytes` counts only what `append` adds.
        self.storage = ChunkQueue(pending.filter { $0.seq > acked }.map { chunk in
            var plain = chunk
            plain.dropEncoded()
            return plain
        })
        self.acked = acked
        self.lastSeq = max(acked, storage.last?.seq ?? 0)
        self.heldAtStart = lastSeq
        self.maxInFlight = maxInFlight
        self.ackTimeout = ackTimeout
    }

    /// Unacknowledged chunks, ascending (a copy: for reports and tests).
    public var pending: [Chunk] { Array(storage) }
    public var pendingCount: Int { storage.count }
    public var isDrained: Bool { storage.isEmpty }
    var inFlight: Int { nextToSend ?? 0 }

    /// At least the bytes the unacknowledged chunks' journal records take (`Outbox`: `{"c":OBJECT}` and a newline
    /// each, OBJECT bounded by `MessageCodec.encodedSizeBound`, which escapes the text exactly): what a compaction
    /// of the journal must keep. O(chunks and their text), without copying the window: for `send`'s rare compaction
    /// checks only.
    public func pendingRecordsBound() -> Int {
        var total = 0
        for i in 0..<storage.count { total += MessageCodec.encodedSizeBound(storage[i]) + 8 }
        return total
    }

    /// Chunks may go out on this connection: the answer to `resume` came, or the window opened ahead of it
    /// (`resumeAheadOutgoing`).
    public var isOpen: Bool { nextToSend != nil }

    /// A new connection is up: nothing is in flight on it until the desktop answers `resume`.
    public mutating func connectionLost() {
        nextToSend = nil
        inFlightBytes = 0
    }

    /// The reference client's bound on chunks in flight (PROTOCOL.md). 16,384 rather than 4,096: a burst runs at
    /// 1-2 million lines a second here, and the acks wait for the desktop's fsync, which on this VM's disk takes
    /// 0.2 ms in most commits and up to 15 ms in some; 4,096 lines are 2-4 ms of a burst, so the sender stopped at
    /// every slow fsync (README, Experiments: 32,768 was no faster).
    public static let defaultMaxInFlight = 16_384

    /// Whether one more chunk of `bytes` bytes of text may go out (chunks and bytes in flight; a chunk alone
    /// always may).
    @inline(__always)
    func mayAddInFlight(_ next: Int, bytes: Int) -> Bool {
        next < maxInFlight && (next == 0 || inFlightBytes &+ bytes <= maxInFlightBytes)
    }

    /// Takes new chunks into `storage`, moved out of `chunks` (what `appendOutgoing(moving:)` does before sending).
    mutating func hold(moving chunks: inout [Chunk]) {
        // Checked by index, then moved at once (iterating copied every chunk once more).
        for i in chunks.indices {
            precondition(chunks[i].seq > lastSeq, "sequence numbers must increase")
            lastSeq = chunks[i].seq
        }
        let first = storage.count
        storage.append(moving: &chunks)
        for i in first..<storage.count {
            let bytes = storage[i].encodedCount
            guard bytes > 0 else { continue }
            if encodedBytes + bytes <= maxEncodedBytes {
                encodedBytes += bytes
            } else {
                storage[i].dropEncoded()
            }
        }
    }

    /// Whether `appendAloneEncoded` applies: resumed, every chunk held already sent, room for one more in flight.
    public var sendsNextAlone: Bool {
        guard let next = nextToSend else { return false }
        return next == storage.count && next < maxInFlight && (next == 0 || inFlightBytes < maxInFlightBytes)
    }

    /// True when chunks are in flight and no ack progress came for `ackTimeout` seconds.
    public func isStalled(now: Double) -> Bool {
        guard let next = nextToSend, next > 0 else { return false }
        return now - lastProgress > ackTimeout
    }

    /// Drops every chunk through `seq`. A desktop that claims more than was ever sent (a broken or hostile
    /// peer) is believed only up to the last chunk sent (or held at the start, which an earlier run may have
    /// sent): a chunk held but not yet sent (behind `maxInFlight`) would otherwise count as delivered and leave
    /// the journal unsent, and the next line's sequence number would not be above `acked`.
    mutating func dropThrough(_ claimed: UInt64) {
        let sent = sentCount > 0 ? storage[sentCount - 1].seq : 0
        let seq = min(claimed, max(sent, heldAtStart))
        guard seq > acked else { return }
        acked = seq
        // How many chunks are through `seq` (ascending: a binary search), then removed at once. `storage.first` and
        // `removeFirst()` copied and destroyed every chunk one by one: about 300 instructions a chunk in a burst.
        var low = 0
        var high = storage.count
        while low < high {
            let mid = low + (high - low) / 2
            if storage[mid].seq <= seq { low = mid + 1 } else { high = mid }
        }
        let count = low
        // Chunks dropped before they went out (a `resume` answer naming more than was sent on this run) may hold
        // encoded bytes: no longer counted.
        for i in min(sentCount, count)..<count {
            encodedBytes -= storage[i].encodedCount
        }
        sentCount = max(0, sentCount - count)
        if let next = nextToSend {
            // What leaves the flight: the in-flight chunks among the dropped ones.
            for i in 0..<min(count, next) { inFlightBytes -= storage[i].textUTF8Count }
            nextToSend = max(0, next - count)
        }
        storage.removeFirst(count)
    }

    /// Marks the last stored chunk, at `index`, sent alone and returns it; its encoded bytes go with it (the
    /// message has them, see `Chunk.encoded`): `nextOutgoing`'s paced line.
    mutating func takeLast(_ index: Int) -> Chunk {
        nextToSend = storage.count
        inFlightBytes += storage[index].textUTF8Count
        let chunk = storage[index]
        let bytes = chunk.encodedCount
        if bytes > 0 {
            storage[index].dropEncoded()
            encodedBytes -= bytes
        }
        sentCount = max(sentCount, storage.count)
        return chunk
    }
}
