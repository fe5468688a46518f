/// The desktop's sequencing rule for one device, as a value.
///
/// Per session it remembers `accepted` (the highest sequence number handed to the sinks) and `delivered`
/// (the highest one that every sink took and that is durable: the ack level).
/// - a chunk at or below `accepted` is a duplicate (a resend after a reconnect): dropped, never delivered twice;
/// - a chunk above `accepted` is accepted; a jump forward is allowed, because the client only ever resends what
///   it has not seen acknowledged, so a jump means this desktop lost its own state (its files were reset), and
///   the chunks in between are gone from the client already;
/// - chunks inside one message must be consecutive (the codec checks that).
public struct SessionLedger: Sendable {
    public struct Entry: Sendable, Equatable {
        public var accepted: UInt64
        public var delivered: UInt64
    }

    public struct Offer: Sendable, Equatable {
        /// New chunks to hand to the sinks, in order.
        public var accepted: [Chunk]
        /// Duplicates seen in this offer.
        public var duplicates: Int
        /// When the offer held only duplicates that are already durable: the ack to send right away.
        public var immediateAck: UInt64?
    }

    var sessions: [String: Entry] = [:]

    public init() {}

    public func entry(_ session: String) -> Entry? { sessions[session] }

    public var allSessions: [String: Entry] { sessions }

    /// Seeds a session from durable state (after a restart).
    public mutating func restore(session: String, delivered: UInt64) {
        let current = sessions[session] ?? Entry(accepted: 0, delivered: 0)
        sessions[session] = Entry(accepted: max(current.accepted, delivered), delivered: max(current.delivered, delivered))
    }

    public mutating func offer(session: String, chunks: [Chunk]) -> Offer {
        var entry = sessions[session] ?? Entry(accepted: 0, delivered: 0)
        var fresh: [Chunk] = []
        var duplicates = 0
        for chunk in chunks {
            if chunk.seq <= entry.accepted {
                duplicates += 1
            } else {
                fresh.append(chunk)
                entry.accepted = chunk.seq
            }
        }
        sessions[session] = entry
        let ack: UInt64? = fresh.isEmpty && duplicates > 0 && entry.delivered == entry.accepted ? entry.delivered : nil
        return Offer(accepted: fresh, duplicates: duplicates, immediateAck: ack)
    }

    /// Every sink took `session` through `seq` and it is durable. Returns true when that moved the ack level.
    @discardableResult
    public mutating func markDelivered(session: String, through seq: UInt64) -> Bool {
        var entry = sessions[session] ?? Entry(accepted: seq, delivered: 0)
        guard seq > entry.delivered else { return false }
        entry.delivered = seq
        entry.accepted = max(entry.accepted, seq)
        sessions[session] = entry
        return true
    }
}
