import SpeakBridgeProtocol

/// The one place where "delivered" is decided, as a value (the pipeline owns one, under its lock).
///
/// - `taken[sink][key]`: the last seq of a session that sink has taken. Seeded at start from the sink's durable
///   position: the progress log for classes (a) and (b), the sink itself for (c) (`DeliveryClass`); in memory it
///   runs ahead of the fsync. A sink with no position for a session that others have joins at their highest
///   level (a sink added to `serve` does not replay history).
/// - `pending[key]`: taken by every sink, waiting for the group fsync of the progress log.
/// - `durable[key]`: the ack level: taken by every sink and fsynced. Only `commit` moves it.
/// The ledger's `delivered` (what `resume` reports) is only ever set from `durable`; the sink runner's filter
/// (skip what a sink already took) reads `taken`. Nothing else keeps a copy. (A FIFO's memory of how much of a
/// long text it wrote is byte-level state inside the one write in flight, not a level.)
struct DeliveryLevels: Sendable {
    typealias SessionKey = DeliveryPipeline.SessionKey

    private(set) var taken: [[SessionKey: UInt64]]
    private(set) var pending: [SessionKey: UInt64] = [:]
    private(set) var durable: [SessionKey: UInt64] = [:]

    /// `seeds[key][sink]`: each sink's durable position per session (sinks without one are absent).
    init(sinks: Int, seeds: [SessionKey: [Int: UInt64]]) {
        taken = Array(repeating: [:], count: sinks)
        for (key, bySink) in seeds {
            let fallback = bySink.values.max() ?? 0
            for sink in 0..<sinks { taken[sink][key] = bySink[sink] ?? fallback }
            durable[key] = (0..<sinks).map { taken[$0][key]! }.min() ?? fallback
        }
    }

    func level(sink: Int, _ key: SessionKey) -> UInt64? { taken[sink][key] }

    /// A position learned later (an `.ownPosition` sink asked about a session the log does not know). Never lowers.
    mutating func adopt(sink: Int, _ key: SessionKey, _ seq: UInt64) {
        if taken[sink][key] == nil { taken[sink][key] = seq }
        settle(key)
    }

    /// `sink` took `key` through `seq` (or skipped up to it). True when something now waits for the fsync.
    @discardableResult
    mutating func advance(sink: Int, _ key: SessionKey, to seq: UInt64) -> Bool {
        taken[sink][key] = max(taken[sink][key] ?? 0, seq)
        return settle(key)
    }

    /// Moves `pending` when every sink is past the durable level of `key`.
    @discardableResult
    private mutating func settle(_ key: SessionKey) -> Bool {
        guard let all = taken.map({ $0[key] ?? 0 }).min() else { return false }
        guard all > (durable[key] ?? 0), all > (pending[key] ?? 0) else { return false }
        pending[key] = all
        return true
    }

    /// How many chunks wait for the fsync (above each session's ack level). O(sessions pending).
    var pendingChunks: UInt64 {
        pending.reduce(UInt64(0)) { sum, entry in
            let floor = durable[entry.key] ?? 0
            return sum &+ (entry.value > floor ? entry.value - floor : 0)
        }
    }

    /// Everything waiting for the fsync, handed to the committer.
    mutating func takePending() -> [SessionKey: UInt64] {
        defer { pending = [:] }
        return pending
    }

    /// The fsync failed: the batch waits again (merged with what arrived meanwhile).
    mutating func requeue(_ batch: [SessionKey: UInt64]) {
        for (key, seq) in batch where seq > (pending[key] ?? 0) { pending[key] = seq }
    }

    /// The fsync of `batch` succeeded: these become the ack level. Returns what advanced.
    mutating func commit(_ batch: [SessionKey: UInt64]) -> [(SessionKey, UInt64)] {
        var advanced: [(SessionKey, UInt64)] = []
        for (key, seq) in batch where seq > (durable[key] ?? 0) {
            durable[key] = seq
            advanced.append((key, seq))
        }
        return advanced
    }

    /// A retired session (nothing of it in flight): its levels go; the log keeps its ack level.
    mutating func retire(_ key: SessionKey) {
        for sink in taken.indices { taken[sink][key] = nil }
        durable[key] = nil
        pending[key] = nil
    }

    /// A revoked device: everything of it goes. O(sessions).
    mutating func forget(_ device: DeviceID) {
        for sink in taken.indices { taken[sink] = taken[sink].filter { $0.key.device != device } }
        durable = durable.filter { $0.key.device != device }
        pending = pending.filter { $0.key.device != device }
    }
}
