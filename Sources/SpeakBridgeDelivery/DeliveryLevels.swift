import SpeakBridgeProtocol

/// The one place where "delivered" is decided, as a value (the pipeline owns one, under its lock).
///
/// Per session (`Entry`, one dictionary entry, so an advance hashes its key once, not once per map and per sink):
/// - `taken[sink]`: the last seq of the session that sink has taken. Seeded at start from the sink's durable
///   position: the progress log for classes (a) and (b), the sink itself for (c) (`DeliveryClass`); in memory it
///   runs ahead of the fsync. A sink with no position for a session that others have joins at their highest
///   level (a sink added to `serve` does not replay history).
/// - `pending`: taken by every sink, waiting for the group fsync of the progress log (the sessions that have one
///   are listed in `pendingKeys`, in the order they got it; `takePending` hands them to the committer).
/// - `durable`: the ack level: taken by every sink and fsynced. Only `commit` moves it.
/// The ledger's `delivered` (what `resume` reports) is only ever set from `durable`; the sink runner's filter
/// (skip what a sink already took) reads `taken`. Nothing else keeps a copy. (A FIFO's memory of how much of a
/// long text it wrote is byte-level state inside the one write in flight, not a level.)
/// `pendingChunks` is kept as a sum (updated per advance, recomputed per commit), not summed on every read.
struct DeliveryLevels: Sendable {
    typealias SessionKey = DeliveryPipeline.SessionKey

    struct Entry: Sendable {
        /// Per sink; nil: that sink has no level for the session (counts as 0).
        var taken: [UInt64?]
        var pending: UInt64?
        var durable: UInt64?

        /// What a new level changed: the session's chunks waiting for the fsync before and after, and its new
        /// `pending` level.
        struct Change {
            var before: UInt64
            var after: UInt64
            /// The session had a `pending` level already (it is in `pendingKeys`).
            var wasPending: Bool
        }

        /// Sets `sink`'s level (`raiseOnly`: never lowers it, a missing level counting as 0; else only when it
        /// has none), then moves `pending` when every sink is past the ack level and the old pending level.
        mutating func set(sink: Int, _ seq: UInt64, raiseOnly: Bool) -> Change? {
            if raiseOnly {
                taken[sink] = max(taken[sink] ?? 0, seq)
            } else if taken[sink] == nil {
                taken[sink] = seq
            }
            guard !taken.isEmpty else { return nil }
            var all = UInt64.max
            for level in taken { all = min(all, level ?? 0) }
            let floor = durable ?? 0
            let old = pending ?? 0
            guard all > floor, all > old else { return nil }
            let wasPending = pending != nil
            pending = all
            return Change(before: old > floor ? old - floor : 0, after: all - floor, wasPending: wasPending)
        }
    }

    let sinks: Int
    /// `taken` of a new session (shared storage, copied on its first write).
    let blankTaken: [UInt64?]
    private(set) var sessions: [SessionKey: Entry] = [:]
    /// Every session with a `pending` level, once each. A list, not a second dictionary: an advance that moves a
    /// session's level (every paced line) hashed its key once more into that dictionary, which the committer then
    /// emptied, so its next advance allocated it again; now only a session's first advance after an fsync appends.
    private(set) var pendingKeys: [SessionKey] = []
    /// How many chunks wait for the fsync (above each session's ack level).
    private(set) var pendingChunks: UInt64 = 0
    /// The session `rememberingLevel` looked up last and where its entry is, until `sessions` next gains or loses one
    /// (which moves indices: every such change clears it). A paced line reads its session's level when it is
    /// submitted and raises it when its sink took it: one hash of the key instead of two.
    private var memo: (key: SessionKey, index: Dictionary<SessionKey, Entry>.Index)?

    /// `seeds[key][sink]`: each sink's durable position per session (sinks without one are absent).
    init(sinks: Int, seeds: [SessionKey: [Int: UInt64]]) {
        self.sinks = sinks
        blankTaken = Array(repeating: nil, count: sinks)
        for (key, bySink) in seeds {
            let fallback = bySink.values.max() ?? 0
            let taken = (0..<sinks).map { bySink[$0] ?? fallback }
            sessions[key] = Entry(taken: taken, pending: nil, durable: taken.min() ?? fallback)
        }
    }

    func level(sink: Int, _ key: SessionKey) -> UInt64? { sessions[key]?.taken[sink] }

    /// `level(sink:_:)`, remembering where `key`'s entry is for the `advance` that follows.
    mutating func rememberingLevel(sink: Int, _ key: SessionKey) -> UInt64? {
        if let memo, memo.key == key { return sessions.values[memo.index].taken[sink] }
        guard let index = sessions.index(forKey: key) else { return nil }
        memo = (key, index)
        return sessions.values[index].taken[sink]
    }

    /// Every session with a `pending` level, and that level. O(pending sessions): for the committer and tests.
    var pending: [SessionKey: UInt64] {
        var out: [SessionKey: UInt64] = [:]
        for key in pendingKeys { out[key] = sessions[key]?.pending }
        return out
    }

    /// Something waits for the fsync.
    var hasPending: Bool { !pendingKeys.isEmpty }

    /// The level of `key` waiting for the fsync, if any.
    func pendingLevel(_ key: SessionKey) -> UInt64? { sessions[key]?.pending }

    /// The ack level of `key`.
    func ackLevel(_ key: SessionKey) -> UInt64? { sessions[key]?.durable }

    /// Every session's ack level.
    var ackLevels: [SessionKey: UInt64] { sessions.compactMapValues(\.durable) }

    /// A position learned later (an `.ownPosition` sink asked about a session the log does not know). Never lowers.
    mutating func adopt(sink: Int, _ key: SessionKey, _ seq: UInt64) {
        let blank = self.blank
        let change = sessions[key, default: blank].set(sink: sink, seq, raiseOnly: false)
        memo = nil  // it may have inserted the session
        apply(change, key)
    }

    /// `sink` took `key` through `seq` (or skipped up to it). True when something now waits for the fsync.
    @discardableResult
    mutating func advance(sink: Int, _ key: SessionKey, to seq: UInt64) -> Bool {
        if let memo, memo.key == key {  // the session `rememberingLevel` found: no hash
            return apply(sessions.values[memo.index].set(sink: sink, seq, raiseOnly: true), key)
        }
        let blank = self.blank
        // In place in the dictionary: the key is hashed once here (`apply` hashes nothing).
        let change = sessions[key, default: blank].set(sink: sink, seq, raiseOnly: true)
        memo = nil  // it may have inserted the session
        return apply(change, key)
    }

    /// A session no sink has a level for yet.
    var blank: Entry { Entry(taken: blankTaken, pending: nil, durable: nil) }

    @discardableResult
    private mutating func apply(_ change: Entry.Change?, _ key: SessionKey) -> Bool {
        guard let change else { return false }
        pendingChunks = pendingChunks &- change.before &+ change.after
        if !change.wasPending { pendingKeys.append(key) }
        return true
    }

    /// Everything waiting for the fsync, handed to the committer: each session once. A list, not a dictionary
    /// (making one per fsync cost a generic-metadata lookup and a table allocation).
    mutating func takePending() -> [(SessionKey, UInt64)] {
        var batch: [(SessionKey, UInt64)] = []
        batch.reserveCapacity(pendingKeys.count)
        for key in pendingKeys {
            guard let index = sessions.index(forKey: key),  // always found: retire and forget unlist
                  let level = sessions.values[index].pending else { continue }
            batch.append((key, level))
            sessions.values[index].pending = nil
        }
        pendingKeys.removeAll(keepingCapacity: true)
        pendingChunks = 0
        return batch
    }

    /// The fsync failed: the batch waits again (merged with what arrived meanwhile).
    mutating func requeue(_ batch: [(SessionKey, UInt64)]) {
        let blank = self.blank
        for (key, seq) in batch where seq > (sessions[key]?.pending ?? 0) {
            if sessions[key]?.pending == nil { pendingKeys.append(key) }
            sessions[key, default: blank].pending = seq
        }
        memo = nil
        recount()
    }

    /// The fsync of `batch` succeeded: these become the ack level. Returns what advanced.
    mutating func commit(_ batch: [(SessionKey, UInt64)]) -> [(SessionKey, UInt64)] {
        var advanced: [(SessionKey, UInt64)] = []
        let blank = self.blank
        for (key, seq) in batch where seq > (sessions[key]?.durable ?? 0) {
            sessions[key, default: blank].durable = seq
            advanced.append((key, seq))
        }
        memo = nil
        if !pendingKeys.isEmpty { recount() }  // advances that came meanwhile now count from the new ack levels
        return advanced
    }

    /// A retired session (nothing of it in flight): its levels go; the log keeps its ack level.
    mutating func retire(_ key: SessionKey) {
        if sessions.removeValue(forKey: key)?.pending != nil { pendingKeys.removeAll { $0 == key } }
        memo = nil
        recount()
    }

    /// A revoked device: everything of it goes. O(sessions).
    mutating func forget(_ device: DeviceID) {
        sessions = sessions.filter { $0.key.device != device }
        memo = nil
        pendingKeys.removeAll { $0.device == device }
        recount()
    }

    /// `pendingChunks` from scratch. O(sessions pending).
    private mutating func recount() {
        pendingChunks = pendingKeys.reduce(UInt64(0)) { sum, key in
            guard let entry = sessions[key], let level = entry.pending else { return sum }
            let floor = entry.durable ?? 0
            return sum &+ (level > floor ? level - floor : 0)
        }
    }
}
