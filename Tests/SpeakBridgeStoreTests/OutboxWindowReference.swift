@testable import SpeakBridgeProtocol

/// The window's first sending path, kept here as the reference the production one (`OutboxWindow+Encoded.swift`:
/// `appendOutgoing`, `ackOutgoing`, `resumedOutgoing`, `appendAloneEncoded`) is compared with
/// (`OutboxWindowEncodedTests`): the same rule written the plain way, each batch copied into an array and made a
/// `Message`. It changes the window's state through the same internals (`hold`, `dropThrough`), but packs, sends a
/// lone chunk and drops encoded bytes with its own code, so a change to `nextOutgoing`'s batching, bytes or state
/// shows as a difference. No production code calls it.
extension OutboxWindow {
    /// `resumedOutgoing(delivered:now:)`, as messages.
    mutating func resumed(delivered: UInt64, now: Double) -> [Message] {
        dropThrough(delivered)
        nextToSend = 0
        lastProgress = now
        return nextMessages()
    }

    /// `appendOutgoing(contentsOf:)`, as messages.
    mutating func append(contentsOf chunks: [Chunk]) -> [Message] {
        var held = chunks
        hold(moving: &held)
        return nextMessages()
    }

    /// `appendAloneEncoded(_:)`, as a message.
    mutating func appendAlone(_ chunk: Chunk) -> Message {
        precondition(sendsNextAlone, "appendAlone needs sendsNextAlone")
        precondition(chunk.seq > lastSeq, "sequence numbers must increase")
        var held = chunk
        held.dropEncoded()  // the message has it; held chunks keep only their fields (see `Chunk.encoded`)
        storage.append(held)
        lastSeq = chunk.seq
        nextToSend = storage.count
        sentCount = storage.count
        return .chunk(session: session, chunk)
    }

    /// `ackOutgoing(_:now:)`, as messages.
    mutating func ack(_ seq: UInt64, now: Double) -> [Message] {
        if seq > acked { lastProgress = now }
        dropThrough(seq)
        return nextMessages()
    }

    /// `nextOutgoing()`, as messages: from `nextToSend` on, at most up to `maxInFlight`, consecutive chunks in
    /// batches of at most `maxChunksPerBatch` whose `MessageCodec.encodedSizeBound`s (and a comma each) fit
    /// `frameBudget` after the envelope (a batch's first chunk always goes); a batch of one is its `chunk` message.
    /// (No shortcut for a paced line: a lone chunk goes through the same loop.)
    mutating func nextMessages() -> [Message] {
        guard var next = nextToSend else { return [] }
        let available = storage.count
        var messages: [Message] = []
        while next < available, next < maxInFlight {
            var batch: [Chunk] = []
            var size = Self.envelopeSize(sessionBytes: session.utf8.count)
            while next < available, next < maxInFlight, batch.count < SpeakBridgeProtocol.maxChunksPerBatch {
                let chunk = storage[next]
                let cost = MessageCodec.encodedSizeBound(chunk) + 1
                if !batch.isEmpty, size + cost > Self.frameBudget { break }
                let encoded = chunk.encodedCount
                batch.append(chunk)
                if encoded > 0 {
                    storage[next].dropEncoded()  // the batch has it (see `Chunk.encoded`)
                    encodedBytes -= encoded
                }
                size += cost
                next += 1
            }
            messages.append(batch.count == 1 ? .chunk(session: session, batch[0]) : .chunks(session: session, batch))
        }
        nextToSend = next
        sentCount = max(sentCount, next)
        return messages
    }
}
