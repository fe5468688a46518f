/// The desktop's sequencing rule for one device, as a value.
///
/// Per session it remembers `accepted` (the highest sequence number handed to the sinks) and `delivered`
/// (the highest one that every sink took and that is durable: the ack level).
/// - a chunk at or below `accepted` is a duplicate (a resend after a reconnect): dropped, never delivered twice;
/// - a chunk above `accepted` is accepted; a jump forward is allowed, because the client only ever resends what
///   it has not seen acknowledged, so a jump means this desktop lost its own state (its files were reset), and
///   the chunks in between are gone from the client already;
/// - chunks inside one message must be consecutive (the codec checks that).
///
/// Bounds (PROTOCOL.md, "Session bound"): at most `maxLive` sessions are *live* (full state, in the sinks'
/// progress). A new session beyond that *retires* the least recently used live session that has nothing in
/// flight (`accepted == delivered`): it keeps only its ack level, in a compact table of at most `maxRetired`
/// entries. Retired state is never forgotten (only revoking the device drops it), so a retired session that
/// comes back is restored with its level and no chunk of it is ever accepted twice. When no live session can be
/// retired (all have chunks in flight, or the retired table is full), the new session is refused with
/// `too-many-sessions` and nothing of it is accepted.
public struct SessionLedger: Sendable {
    public struct Entry: Sendable, Equatable {
        public var accepted: UInt64
        public var delivered: UInt64
    }

    /// Why a message for a session was refused; the daemon sends `too-many-sessions` with `message`.
    public enum Refusal: Error, Sendable, Equatable {
        /// Every live session has chunks in flight: retry once acks came.
        case busy
        /// The retired table is full: this device has used too many sessions; only revoking it resets that.
        case exhausted

        public static let code = ProtocolErrorCode.tooManySessions

        public var message: String {
            switch self {
            case .busy:
                return "every open session of this device has chunks in flight; retry this session after their acks"
            case .exhausted:
                return "this device has used too many sessions; the desktop must revoke and re-pair it"
            }
        }
    }

    public struct Offer: Sendable, Equatable {
        /// New chunks to hand to the sinks, in order.
        public var accepted: [Chunk]
        /// Duplicates seen in this offer.
        public var duplicates: Int
        /// When the offer held only duplicates that are already durable: the ack to send right away.
        public var immediateAck: UInt64?
        /// Set when the session was refused: nothing was accepted and nothing changed.
        public var refusal: Refusal? = nil
        /// Live sessions this offer retired (session, ack level): the caller drops their other state.
        public var retired: [Retirement] = []
    }

    public struct Retirement: Sendable, Equatable {
        public var session: String
        public var delivered: UInt64
    }

    public static let defaultMaxLive = 64
    public static let defaultMaxRetired = 4_096

    public let maxLive: Int
    public let maxRetired: Int
    /// A live session: its levels and its last use, by `tick` (for least-recently-used retirement). One
    /// dictionary, so a chunk hashes its session once (a separate last-use table cost a second string hash).
    struct Live: Sendable {
        var entry: Entry
        var lastUse: UInt64
    }
    private(set) var sessions: [String: Live] = [:]
    /// The session `offer` found last and where its entry is, until `sessions` next gains or loses one (`restore`,
    /// `admit` and `retire` clear it): a connection's chunks come for one session, so its string is hashed once.
    private var last: (session: String, index: Dictionary<String, Live>.Index)?
    var tick: UInt64 = 0
    /// Retired sessions: their ack level only.
    var retiredLevels: [String: UInt64] = [:]

    public init(maxLive: Int = SessionLedger.defaultMaxLive, maxRetired: Int = SessionLedger.defaultMaxRetired) {
        self.maxLive = max(1, maxLive)
        self.maxRetired = max(0, maxRetired)
    }

    public func entry(_ session: String) -> Entry? { sessions[session]?.entry }

    public var allSessions: [String: Entry] { sessions.mapValues(\.entry) }
    public var retiredSessions: [String: UInt64] { retiredLevels }
    public var liveCount: Int { sessions.count }

    /// The ack level of a session for `resume`: live, retired or 0 when unknown. Changes nothing.
    public func delivered(_ session: String) -> UInt64 {
        sessions[session]?.entry.delivered ?? retiredLevels[session] ?? 0
    }

    /// Seeds a live session from durable state (after a restart). Bounds are applied by `trim()`.
    public mutating func restore(session: String, delivered: UInt64) {
        let current = sessions[session]?.entry ?? Entry(accepted: 0, delivered: 0)
        tick &+= 1
        last = nil
        sessions[session] = Live(entry: Entry(accepted: max(current.accepted, delivered),
                                              delivered: max(current.delivered, delivered)), lastUse: tick)
        retiredLevels[session] = nil
    }

    /// Seeds a retired session from durable state (after a restart).
    public mutating func restoreRetired(session: String, delivered: UInt64) {
        guard sessions[session] == nil else { return }
        retiredLevels[session] = max(retiredLevels[session] ?? 0, delivered)
    }

    /// After restoring: retires live sessions beyond `maxLive` (all are quiescent after a restart). The retired
    /// table may then exceed `maxRetired` (state written by an older desktop): nothing is ever forgotten; new
    /// sessions are refused until it is back under the bound.
    public mutating func trim() -> [Retirement] {
        var out: [Retirement] = []
        while sessions.count > maxLive, let victim = leastRecentlyUsedQuiescent() {
            out.append(retire(victim))
        }
        return out
    }

    public mutating func offer(session: String, chunks: [Chunk]) -> Offer {
        var retired: [Retirement] = []
        // The entry by index: a live session's chunk costs one string hash (its last use is in the same entry), or
        // none when it is the session of the previous offer.
        var index: Dictionary<String, Live>.Index?
        if let last, last.session == session {
            index = last.index
        } else {
            index = sessions.index(forKey: session)
        }
        if index == nil {
            switch admit(session) {
            case .success(let r): retired = r
            case .failure(let refusal):
                return Offer(accepted: [], duplicates: 0, immediateAck: nil, refusal: refusal)
            }
            index = sessions.index(forKey: session)
        }
        guard let index else { preconditionFailure("admit inserts the session it admits") }
        last = (session, index)
        tick &+= 1
        sessions.values[index].lastUse = tick
        var entry = sessions.values[index].entry
        var fresh: [Chunk] = []
        var duplicates = 0
        if let first = chunks.first, first.seq > entry.accepted, Self.ascending(chunks) {
            // The common case, all new (a message's seqs are consecutive): the caller's array as it is, no copy
            // of each chunk. Same result as the loop below.
            fresh = chunks
            entry.accepted = chunks[chunks.count - 1].seq
        } else {
            for chunk in chunks {
                if chunk.seq <= entry.accepted {
                    duplicates += 1
                } else {
                    // Detached: a kept chunk whose frame also held duplicates must not keep the whole frame.
                    fresh.append(chunk.detached())
                    entry.accepted = chunk.seq
                }
            }
        }
        sessions.values[index].entry = entry
        let ack: UInt64? = fresh.isEmpty && duplicates > 0 && entry.delivered == entry.accepted ? entry.delivered : nil
        return Offer(accepted: fresh, duplicates: duplicates, immediateAck: ack, retired: retired)
    }

    /// Strictly ascending seqs (then every chunk after a new first one is new too).
    static func ascending(_ chunks: [Chunk]) -> Bool {
        var previous: UInt64 = 0
        for chunk in chunks {
            guard chunk.seq > previous else { return false }
            previous = chunk.seq
        }
        return true
    }

    /// `markDelivered` with one lookup of the session: the ack level before, or nil when it did not move.
    public mutating func advanceDelivered(session: String, through seq: UInt64) -> UInt64? {
        guard let index = sessions.index(forKey: session) else { return nil }
        let before = sessions.values[index].entry.delivered
        guard seq > before else { return nil }
        sessions.values[index].entry.delivered = seq
        sessions.values[index].entry.accepted = max(sessions.values[index].entry.accepted, seq)
        return before
    }

    /// Every sink took `session` through `seq` and it is durable. Returns true when that moved the ack level.
    /// Only live sessions move (a retired one has nothing in flight; an unknown one was never accepted).
    @discardableResult
    public mutating func markDelivered(session: String, through seq: UInt64) -> Bool {
        guard let index = sessions.index(forKey: session), seq > sessions.values[index].entry.delivered else {
            return false
        }
        sessions.values[index].entry.delivered = seq
        sessions.values[index].entry.accepted = max(sessions.values[index].entry.accepted, seq)
        return true
    }

    // MARK: - Bound

    /// Makes room for `session` (new or retired) among the live sessions.
    mutating func admit(_ session: String) -> Result<[Retirement], Refusal> {
        let comesBack = retiredLevels[session]
        var retired: [Retirement] = []
        if sessions.count >= maxLive {
            guard let victim = leastRecentlyUsedQuiescent() else { return .failure(.busy) }
            // A returning session frees its own retired slot for the victim.
            guard comesBack != nil || retiredLevels.count < maxRetired else { return .failure(.exhausted) }
            retired.append(retire(victim))
        } else if comesBack == nil && retiredLevels.count > maxRetired {
            // Over the bound only after restoring an older desktop's state: take no new sessions.
            return .failure(.exhausted)
        }
        let level = comesBack ?? 0
        retiredLevels[session] = nil
        last = nil
        sessions[session] = Live(entry: Entry(accepted: level, delivered: level), lastUse: tick)  // `offer` touches it
        return .success(retired)
    }

    mutating func retire(_ session: String) -> Retirement {
        let level = sessions[session]?.entry.delivered ?? 0
        last = nil
        sessions[session] = nil
        retiredLevels[session] = level
        return Retirement(session: session, delivered: level)
    }

    /// O(live sessions), at most `maxLive`: runs only when a session is admitted, never per chunk.
    func leastRecentlyUsedQuiescent() -> String? {
        var best: (String, UInt64)?
        for (session, live) in sessions where live.entry.accepted == live.entry.delivered {
            let used = live.lastUse
            if best == nil || used < best!.1 { best = (session, used) }
        }
        return best?.0
    }
}
