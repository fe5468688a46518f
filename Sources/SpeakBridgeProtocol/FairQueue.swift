/// The desktop's fairness rule for one sink, as a value: one FIFO per key (device), served round robin.
///
/// Order is kept within a key (a session's chunks stay in order); across keys it does not matter, so one device's
/// backlog (up to its high-water mark) never sits in front of another device's line: a batch holds one key's
/// items only, and a key that had a batch fully taken goes to the back of the round. A key whose batch was taken
/// only in part stays in front (the sink may hold half a line of it, which must be finished first).
public struct FairQueue<Key: Hashable & Sendable, Element: Sendable>: Sendable {
    struct Lane: Sendable {
        var items: [Element] = []
        var head = 0
        var remaining: Int { items.count - head }
    }

    var lanes: [Key: Lane] = [:]
    /// Keys with queued items, in serving order.
    var ring: [Key] = []
    public private(set) var count = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }

    public mutating func append(_ key: Key, _ elements: some Collection<Element>) {
        guard !elements.isEmpty else { return }
        if lanes[key] == nil {
            lanes[key] = Lane()
            ring.append(key)
        }
        lanes[key]!.items.append(contentsOf: elements)
        count += elements.count
    }

    /// The next batch: the front key's oldest items, at most `limit`, and while `weight` summed stays under
    /// `budget` (the first item always counts). Nothing is removed until `consume`.
    public func next(limit: Int, budget: Int, weight: (Element) -> Int) -> (key: Key, items: [Element])? {
        guard let key = ring.first, let lane = lanes[key] else { return nil }
        var end = lane.head
        var used = 0
        while end < lane.items.count, end - lane.head < limit, end == lane.head || used < budget {
            used += weight(lane.items[end])
            end += 1
        }
        return (key, Array(lane.items[lane.head..<end]))
    }

    /// `taken` items of the batch `next` returned for `key` (`of` items) were taken by the sink.
    public mutating func consume(_ key: Key, taken: Int, of batchCount: Int) {
        guard var lane = lanes[key] else { return }
        let n = max(0, min(taken, lane.remaining))
        lane.head += n
        count -= n
        if lane.remaining == 0 {
            // Drained: the storage (and what it referenced) goes at once.
            lanes[key] = nil
            ring.removeAll { $0 == key }
            return
        }
        if lane.head > 4_096 && lane.head * 2 > lane.items.count {
            lane.items.removeFirst(lane.head)
            lane.head = 0
        }
        lanes[key] = lane
        if n == batchCount, ring.first == key {
            ring.removeFirst()
            ring.append(key)
        }
    }
}
