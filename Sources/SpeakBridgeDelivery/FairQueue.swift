import DequeModule

/// The desktop's fairness rule for one sink, as a value: one FIFO per key (device), served round robin.
///
/// Order is kept within a key (a session's chunks stay in order); across keys it does not matter, so one device's
/// backlog (up to its high-water mark) never sits in front of another device's line: a batch holds one key's
/// items only, and a key that had a batch fully taken goes to the back of the round. A key whose batch was taken
/// only in part stays in front (the sink may hold half a line of it, which must be finished first), unless the
/// sink said it holds none (`consume(…, behind: true)`: a key held for a reason of its own, or whose turn is up),
/// so that a key the sink cannot take now never keeps the others waiting.
/// Lanes and the ring are `Deque`s: taking from the front is O(taken), with no head index to compact.
public struct FairQueue<Key: Hashable & Sendable, Element: Sendable>: Sendable {
    var lanes: [Key: Deque<Element>] = [:]
    /// Keys with queued items, in serving order.
    var ring: Deque<Key> = []
    public private(set) var count = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }

    public mutating func append(_ key: Key, _ elements: some Collection<Element>) {
        guard !elements.isEmpty else { return }
        if lanes[key] == nil {
            lanes[key] = []
            ring.append(key)
        }
        lanes[key]!.append(contentsOf: elements)
        count += elements.count
    }

    /// The next batch: the front key's oldest items, at most `limit`, and while `weight` summed stays under
    /// `budget` (the first item always counts). Nothing is removed until `consume`.
    public func next(limit: Int, budget: Int, weight: (Element) -> Int) -> (key: Key, items: [Element])? {
        guard let key = ring.first, let lane = lanes[key] else { return nil }
        var taken: [Element] = []
        var used = 0
        for element in lane {
            guard taken.count < limit, taken.isEmpty || used < budget else { break }
            used += weight(element)
            taken.append(element)
        }
        return (key, taken)
    }

    /// Keys with queued items.
    public var keyCount: Int { ring.count }

    /// `taken` items of the batch `next` returned for `key` (`of` items) were taken by the sink. `behind`: the key
    /// goes to the back of the round even if not all of its batch was taken (the sink holds no half line of it).
    public mutating func consume(_ key: Key, taken: Int, of batchCount: Int, behind: Bool = false) {
        guard let remaining = lanes[key]?.count else { return }
        let n = max(0, min(taken, remaining))
        lanes[key]!.removeFirst(n)
        count -= n
        if n == remaining {
            // Drained: the storage (and what it referenced) goes at once.
            lanes[key] = nil
            ring.removeAll { $0 == key }
            return
        }
        if n == batchCount || behind, ring.first == key {
            ring.removeFirst()
            ring.append(key)
        }
    }

    /// Removes `key`'s items that match, except its first `kept` (a batch `next` returned and not yet consumed
    /// stays where it is); its lane and place in the round go when nothing is left. O(lane).
    public mutating func removeAll(_ key: Key, keepingFirst front: Int = 0, where match: (Element) -> Bool) {
        guard let lane = lanes[key] else { return }
        let head = min(max(0, front), lane.count)
        var kept = Deque(lane.prefix(head))
        kept.append(contentsOf: lane.dropFirst(head).filter { !match($0) })
        count -= lane.count - kept.count
        if kept.isEmpty {
            lanes[key] = nil
            ring.removeAll { $0 == key }
        } else {
            lanes[key] = kept
        }
    }

    /// Every queued item, lane by lane in serving order (for reporting what a failing sink holds).
    public func forEach(_ body: (Key, Element) -> Void) {
        for key in ring {
            for element in lanes[key] ?? [] { body(key, element) }
        }
    }
}
