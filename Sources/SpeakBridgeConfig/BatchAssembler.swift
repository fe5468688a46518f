import SpeakBridgeProtocol

/// Collects the parts of incoming batches (per peer) until a batch is complete.
/// A batch whose parts disagree is dropped whole; a batch that never completes is never applied.
public struct BatchAssembler: Sendable {
    struct Partial: Sendable {
        var parts: Int
        var origin: ConfigOrigin
        var withheld = 0
        var received: [Int: [ConfigUpdate]] = [:]
        var keys: Set<String> = []
        /// Arrival order of the batch's first part (a count, not a clock: two batches begun in the same millisecond
        /// still have an oldest).
        var arrival: UInt64
    }

    /// Incomplete batches kept at once; the oldest is dropped beyond this.
    public static let maxPartial = 2
    var partial: [String: Partial] = [:]
    var arrivals: UInt64 = 0

    public init() {}

    public var incompleteBatches: Int { partial.count }

    /// Adds a part; returns the whole batch (entries in part order) once its last part arrived.
    public mutating func add(_ p: OfferPart)
        throws(ConfigError) -> (origin: ConfigOrigin, entries: [ConfigUpdate], withheld: Int)? {
        var batch: Partial
        if let known = partial[p.batch] {
            batch = known
        } else {
            arrivals &+= 1
            batch = Partial(parts: p.parts, origin: p.origin, arrival: arrivals)
        }
        do throws(ConfigError) {
            guard batch.parts == p.parts else { throw ConfigError(.malformed, "parts of batch \(p.batch) disagree on \"parts\"") }
            guard batch.received[p.part] == nil else { throw ConfigError(.malformed, "part \(p.part) of batch \(p.batch) arrived twice") }
            for u in p.entries {
                guard batch.keys.insert(u.key).inserted else { throw ConfigError(.malformed, "\(u.key) appears twice in batch \(p.batch)") }
            }
            guard batch.keys.count <= ConfigWire.maxEntriesPerBatch else {
                throw ConfigError(.tooLarge, "batch \(p.batch) has more than \(ConfigWire.maxEntriesPerBatch) entries")
            }
        } catch {
            partial[p.batch] = nil
            throw error
        }
        batch.received[p.part] = p.entries
        batch.withheld = max(batch.withheld, p.withheld)
        if batch.received.count == batch.parts {
            partial[p.batch] = nil
            return (batch.origin, (1...batch.parts).flatMap { batch.received[$0]! }, batch.withheld)
        }
        partial[p.batch] = batch
        // The oldest by arrival, never the batch that just took a part (a tie of arrival times once picked one at random).
        if partial.count > Self.maxPartial, let oldest = partial.min(by: { $0.value.arrival < $1.value.arrival })?.key {
            partial[oldest] = nil
        }
        return nil
    }
}
