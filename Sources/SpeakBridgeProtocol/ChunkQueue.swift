/// The outbox window's unacknowledged chunks, oldest first: appended at the back, dropped from the front, and changed
/// in place (`queue[i].moveObject(into:)`).
///
/// Why not `Deque<Chunk>`: its in-place access (`_modify`) moves the element out and initializes the slot again from
/// a copy, so every `queue[i].mutatingCall()` copied a chunk (three references retained) and destroyed the other
/// (released): about 160 instructions per chunk in a burst, where the window measures and encodes each held chunk in
/// place. An array's element is changed where it lies. A dropped chunk is destroyed by the drop: its slot gets an
/// empty chunk (which holds nothing), or, when the dead head would be as long as the live tail, the array drops the
/// head and moves the tail to the front, so each chunk is moved at most once on average. (Slots of `Chunk?` set to nil
/// were destroyed through the generic value witnesses, which cost more than the copies saved.)
struct ChunkQueue: RandomAccessCollection, MutableCollection, Sendable {
    private var slots: [Chunk] = []
    /// Index in `slots` of the oldest live chunk; every slot before it holds an empty chunk.
    private var head = 0

    init() {}

    init(_ chunks: [Chunk]) {
        slots = chunks
    }

    /// The array's room, in chunks (for tests: appends must grow it geometrically).
    var capacity: Int { slots.capacity }

    var startIndex: Int { 0 }
    var endIndex: Int { slots.count - head }

    subscript(position: Int) -> Chunk {
        get {
            precondition(position >= 0 && position < count, "ChunkQueue index out of range")
            return slots[head + position]
        }
        _modify {
            precondition(position >= 0 && position < count, "ChunkQueue index out of range")
            yield &slots[head + position]
        }
    }

    mutating func append(_ chunk: consuming Chunk) {
        slots.append(chunk)
    }

    /// Appends `chunks` taken out of the array, each element left an empty chunk (which holds nothing): no chunk is
    /// copied and none destroyed, where an `append(contentsOf:)` copied each (three references retained) and the
    /// caller's array then destroyed the originals. A shared array is copied by the first swap, once.
    mutating func append(moving chunks: inout [Chunk]) {
        // No `reserveCapacity` here: it allocates exactly what it is asked for, so reserving at each call gave up the
        // array's doubling and copied the whole queue at every append of a burst (16 % slower 50,000-line bursts).
        for i in chunks.indices {
            var taken = Chunk(seq: 0, line: "")
            swap(&taken, &chunks[i])
            slots.append(taken)
        }
    }

    /// Drops the `n` oldest chunks (destroyed now, not at the next compaction).
    mutating func removeFirst(_ n: Int) {
        precondition(n >= 0 && n <= count, "ChunkQueue.removeFirst past its end")
        let newHead = head + n
        if newHead == slots.count {
            // A paced stream empties the queue at every ack: its small array is kept; a burst's is freed.
            slots.removeAll(keepingCapacity: slots.capacity <= 1_024)
            head = 0
        } else if newHead >= slots.count - newHead {
            slots.removeFirst(newHead)  // the dead head as long as the live tail: compacted, each chunk destroyed once
            head = 0
        } else {
            for i in head..<newHead { slots[i] = Chunk(seq: 0, line: "") }
            head = newHead
        }
    }
}
