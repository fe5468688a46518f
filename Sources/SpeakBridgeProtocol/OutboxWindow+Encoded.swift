/// The window's sending rule with its batches already encoded: `appendOutgoing`, `ackOutgoing`, `resumedOutgoing`
/// and `appendAloneEncoded` change the window exactly as `append(contentsOf:)`, `ack`, `resumed` and
/// `appendAlone` do and send the same
/// messages, but a `chunks` batch comes as its plaintext (`Outgoing.encoded`), byte for byte
/// `MessageCodec.encode(.chunks(session:, batch))`, written straight from the held chunks into one buffer with room
/// for the tag sealing appends in place. The `[Message]` path copied every chunk into a batch array (and destroyed
/// it after encoding), read each held chunk through a copy and built and destroyed a `Message` per batch: about
/// 400 instructions a burst line.
///
/// Flow of `nextOutgoing`, per batch: the first chunk is only measured; a second one that fits starts the
/// buffer (envelope, both objects); each further one is measured and appended; a batch left with one chunk is its
/// `chunk` message, as in `nextMessages`. Held chunks are read and changed in place (`Chunk.sizeBound`,
/// `Chunk.moveObject`), never copied, except the one of a lone `chunk` message.
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

    /// `append(contentsOf:)`, with batches encoded.
    public mutating func appendOutgoing(contentsOf chunks: [Chunk]) -> [Outgoing] {
        hold(chunks)
        return nextOutgoing()
    }

    /// `ack(_:now:)`, with batches encoded.
    public mutating func ackOutgoing(_ seq: UInt64, now: Double) -> [Outgoing] {
        if seq > acked { lastProgress = now }
        dropThrough(seq)
        return nextOutgoing()
    }

    /// `resumed(delivered:now:)`, with batches encoded.
    public mutating func resumedOutgoing(delivered: UInt64, now: Double) -> [Outgoing] {
        dropThrough(delivered)
        nextToSend = 0
        lastProgress = now
        return nextOutgoing()
    }

    /// `appendAlone`, its message encoded: byte for byte `MessageCodec.encode(appendAlone(chunk))`, with the
    /// envelope written once (`chunkEnvelope`) and room for the tag; no `Message` made.
    public mutating func appendAloneEncoded(_ chunk: consuming Chunk) -> [UInt8] {
        precondition(sendsNextAlone, "appendAlone needs sendsNextAlone")
        precondition(chunk.seq > lastSeq, "sequence numbers must increase")
        let plaintext = MessageCodec.encodeChunk(chunk, envelope: chunkEnvelope)
        lastSeq = chunk.seq
        var held = consume chunk
        held.dropEncoded()  // the message has it; held chunks keep only their fields (see `Chunk.encoded`)
        storage.append(held)
        nextToSend = storage.count
        sentCount = storage.count
        return plaintext
    }

    /// The messages that go out next, as `nextMessages` makes them (same batches, same state changes), each batch
    /// of two or more chunks as its plaintext.
    mutating func nextOutgoing() -> [Outgoing] {
        guard var next = nextToSend else { return [] }
        let available = storage.count
        if next + 1 == available, next < maxInFlight {
            // One chunk to send (a paced line): its `chunk` message (as `nextMessages`).
            return [.message(.chunk(session: session, takeLast(next)))]
        }
        let limit = min(available, maxInFlight)
        let envelope = Self.envelopeSize(sessionBytes: session.utf8.count)
        var messages: [Outgoing] = []
        while next < limit {
            let first = next
            var size = envelope + storage[first].sizeBound() + 1  // the first always goes (`nextMessages`)
            var count = 1
            next += 1
            var out: [UInt8] = []
            while next < limit, count < SpeakBridgeProtocol.maxChunksPerBatch {
                let cost = storage[next].sizeBound() + 1
                if size + cost > Self.frameBudget { break }
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
