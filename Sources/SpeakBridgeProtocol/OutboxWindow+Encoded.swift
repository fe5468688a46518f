/// The window's sending rule: `appendOutgoing`, `ackOutgoing`, `resumedOutgoing` and `appendAloneEncoded` change the
/// window and return what goes out, a `chunks` batch as its plaintext (`Outgoing.encoded`), byte for byte
/// `MessageCodec.encode(.chunks(session:, batch))`, written straight from the held chunks into one buffer with room
/// for the tag sealing appends in place. An earlier `[Message]` path (copying every chunk into a batch array,
/// destroyed after encoding, and a `Message` per batch: about 400 instructions a burst line more) is kept only as the
/// tests' reference (`Tests/SpeakBridgeStoreTests/OutboxWindowReference.swift`), which `OutboxWindowEncodedTests`
/// compares these with: the same batches, the same bytes, the same window after.
///
/// Flow of `nextOutgoing`, per batch: the first chunk is only measured; a second one that fits starts the
/// buffer (envelope, both objects); each further one is measured and appended; a batch left with one chunk is its
/// `chunk` message. Held chunks are read and changed in place (`Chunk.sizeBound`, `Chunk.moveObject`), never copied,
/// except the one of a lone `chunk` message.
extension OutboxWindow {
    /// One message to seal and send: as a value, or a `chunks` batch already encoded (with its tag's room reserved).
    public enum Outgoing: Sendable, Equatable {
        case message(Message)
        case encoded([UInt8])

        /// The message this is (an encoded batch decoded: for tests and reports; `nil` if it does not decode).
        public var message: Message? {
            switch self {
            case .message(let message): return message
            case .encoded(let bytes): return try? MessageCodec.decode(bytes)
            }
        }
    }

    /// New chunks from the producer (already journaled by the caller), batched into as few messages as fit.
    public mutating func appendOutgoing(contentsOf chunks: [Chunk]) -> [Outgoing] {
        var held = chunks
        return appendOutgoing(moving: &held)
    }

    /// `appendOutgoing(contentsOf:)` taking the chunks out of `chunks` (each left an empty chunk) instead of copying
    /// them: for a caller whose array nothing else holds.
    public mutating func appendOutgoing(moving chunks: inout [Chunk]) -> [Outgoing] {
        hold(moving: &chunks)
        return nextOutgoing()
    }

    /// The desktop's `ack` through `seq`: what it frees of the window goes out.
    public mutating func ackOutgoing(_ seq: UInt64, now: Double) -> [Outgoing] {
        if seq > acked { lastProgress = now }
        dropThrough(seq)
        return nextOutgoing()
    }

    /// The desktop's answer to `resume`: what it does not have goes out again, in order.
    public mutating func resumedOutgoing(delivered: UInt64, now: Double) -> [Outgoing] {
        dropThrough(delivered)
        nextToSend = 0
        inFlightBytes = 0
        lastProgress = now
        return nextOutgoing()
    }

    /// Whether the chunks held may go out on a new connection right after its `resume`, before the answer: none of
    /// them went out before — nothing held was sent on any connection of this run (`sentCount`), and nothing is left
    /// from an earlier run's journal (`heldAtStart`), which that run may have sent — so the answer could not drop any
    /// of them as one the desktop has, and they reach it in order after the `resume` (PROTOCOL.md, "Client rules").
    /// A run's first connection usually: a one-shot `send --text`, a streaming `send`'s first line.
    public var sendsBeforeResumeAnswer: Bool {
        nextToSend == nil && sentCount == 0 && heldAtStart <= acked
    }

    /// A new connection whose `resume` is out, when `sendsBeforeResumeAnswer`: the window opens now (as the answer
    /// would open it with nothing to drop), what it holds goes out, and later chunks go as they come; the answer is
    /// then only an ack (`ackOutgoing`). Saves the round trip of the answer on the first chunk.
    public mutating func resumeAheadOutgoing(now: Double) -> [Outgoing] {
        precondition(sendsBeforeResumeAnswer, "resumeAheadOutgoing needs sendsBeforeResumeAnswer")
        nextToSend = 0
        inFlightBytes = 0
        lastProgress = now
        return nextOutgoing()
    }

    /// A new chunk when `sendsNextAlone` (a paced line): its one `chunk` message, encoded (byte for byte
    /// `MessageCodec.encode(.chunk(session:, chunk))`), with the envelope written once (`chunkEnvelope`) and room for
    /// the tag; no `Message` made.
    public mutating func appendAloneEncoded(_ chunk: consuming Chunk) -> [UInt8] {
        precondition(sendsNextAlone, "appendAloneEncoded needs sendsNextAlone")
        precondition(chunk.seq > lastSeq, "sequence numbers must increase")
        let plaintext = MessageCodec.encodeChunk(chunk, envelope: chunkEnvelope)
        lastSeq = chunk.seq
        inFlightBytes += chunk.textUTF8Count
        var held = consume chunk
        held.dropEncoded()  // the message has it; held chunks keep only their fields (see `Chunk.encoded`)
        storage.append(held)
        nextToSend = storage.count
        sentCount = storage.count
        return plaintext
    }

    /// The messages that go out next: from `nextToSend` on, at most up to `maxInFlight` (and `maxInFlightBytes`,
    /// `mayAddInFlight`), consecutive chunks packed
    /// into batches of at most `maxChunksPerBatch` that fit `frameBudget` (each chunk counted by its
    /// `MessageCodec.encodedSizeBound`); each batch of two or more chunks as its plaintext, one chunk as its message.
    mutating func nextOutgoing() -> [Outgoing] {
        guard var next = nextToSend else { return [] }
        let available = storage.count
        if next + 1 == available {
            // One chunk to send (a paced line): its `chunk` message.
            guard mayAddInFlight(next, bytes: storage[next].textUTF8Count) else { return [] }
            return [.message(.chunk(session: session, takeLast(next)))]
        }
        let limit = min(available, maxInFlight)
        let envelope = Self.envelopeSize(sessionBytes: session.utf8.count)
        var messages: [Outgoing] = []
        while next < limit {
            let first = next
            let firstBytes = storage[first].textUTF8Count
            guard mayAddInFlight(first, bytes: firstBytes) else { break }
            inFlightBytes += firstBytes
            var size = envelope + storage[first].sizeBound() + 1  // the first of a batch always fits a frame
            var count = 1
            next += 1
            var out: [UInt8] = []
            while next < limit, count < SpeakBridgeProtocol.maxChunksPerBatch {
                let cost = storage[next].sizeBound() + 1
                if size + cost > Self.frameBudget { break }
                let bytes = storage[next].textUTF8Count
                if inFlightBytes &+ bytes > maxInFlightBytes { break }
                inFlightBytes += bytes
                if count == 1 {
                    // A batch after all: its envelope and first object. Room for the most it can take (the bounds
                    // exceed the objects), within a frame, and for the tag.
                    let most = min(limit - first, SpeakBridgeProtocol.maxChunksPerBatch)
                    let estimate = size + cost &* (most - 1)
                    out.reserveCapacity(min(estimate, Self.frameBudget) + 16)
                    out += MessageCodec.chunksPrefix
                    JSONValue.writeString(session, into: &out)
                    out += MessageCodec.chunksArrayKey
                    encodedBytes -= storage[first].moveObject(into: &out)
                }
                out.append(UInt8(ascii: ","))
                encodedBytes -= storage[next].moveObject(into: &out)
                size += cost
                count += 1
                next += 1
            }
            if count == 1 {
                let chunk = storage[first]
                let bytes = chunk.encodedCount
                if bytes > 0 {
                    storage[first].dropEncoded()  // the message has it
                    encodedBytes -= bytes
                }
                messages.append(.message(.chunk(session: session, chunk)))
            } else {
                out.append(UInt8(ascii: "]"))
                out.append(UInt8(ascii: "}"))
                messages.append(.encoded(out))
            }
        }
        nextToSend = next
        sentCount = max(sentCount, next)
        return messages
    }
}
