@testable import SpeakBridgeProtocol
import SpeakBridgeTestSupport
import Testing

/// The outbox window's queue (`ChunkQueue`): the same chunks in the same order as an array given the same appends,
/// in-place changes and front drops, across its compactions; and a dropped chunk is destroyed at once.
@Suite("ChunkQueue: a FIFO of chunks changed in place")
struct ChunkQueueTests {
    @Test("random appends, in-place changes and front drops match an array", arguments: [1, 2, 3, 4])
    func matchesAnArray(seed: UInt64) {
        var generator = SplitMix64(seed: seed)
        var queue = ChunkQueue()
        var reference: [Chunk] = []
        var next: UInt64 = 1
        for _ in 0..<4_000 {
            switch Int.random(in: 0..<10, using: &generator) {
            case 0..<4:
                let chunk = Chunk(seq: next, text: "line \(next)")
                next += 1
                queue.append(chunk)
                reference.append(chunk)
            case 4..<6:
                let n = Int.random(in: 0...40, using: &generator)
                let chunks = (0..<n).map { Chunk(seq: next + UInt64($0), text: "batch \(next + UInt64($0))") }
                next += UInt64(n)
                var moved = chunks
                queue.append(moving: &moved)
                reference.append(contentsOf: chunks)
            case 6..<8:
                guard !reference.isEmpty else { continue }
                let i = Int.random(in: 0..<reference.count, using: &generator)
                queue[i].final.toggle()
                reference[i].final.toggle()
            default:
                let n = Int.random(in: 0...min(reference.count, 60), using: &generator)
                queue.removeFirst(n)
                reference.removeFirst(n)
            }
            #expect(queue.count == reference.count)
            #expect(queue.first == reference.first && queue.last == reference.last)
        }
        #expect(Array(queue) == reference)
        queue.removeFirst(queue.count)
        #expect(queue.isEmpty)
        queue.append(Chunk(seq: next, text: "after"))
        #expect(Array(queue) == [Chunk(seq: next, text: "after")])
    }

    @Test("append(moving:) takes the chunks in order and leaves empty ones; another copy of the array keeps its own")
    func appendMoving() {
        var queue = ChunkQueue()
        queue.append(Chunk(seq: 1, text: "one"))
        var chunks = (2...5).map { Chunk(seq: UInt64($0), text: "line \($0)") }
        let kept = chunks  // shares the buffer: the move must not reach into it
        queue.append(moving: &chunks)
        #expect(Array(queue) == [Chunk(seq: 1, text: "one")] + kept)
        #expect(chunks.count == 4 && chunks.allSatisfy { $0.seq == 0 && $0.text.isEmpty })
        #expect(kept.map(\.seq) == [2, 3, 4, 5] && kept[3].text == "line 5")
    }

    @Test("appends grow the queue's array geometrically: a burst's batches do not copy the whole queue each")
    func appendsGrowGeometrically() {
        var queue = ChunkQueue()
        var capacities: Set<Int> = []
        for batch in 0..<200 {
            var chunks = (0..<10).map { Chunk(seq: UInt64(batch * 10 + $0 + 1), text: "t") }
            queue.append(moving: &chunks)
            capacities.insert(queue.capacity)
        }
        #expect(queue.count == 2_000)
        // Doubling reaches 2,000 in about a dozen sizes; an exact reservation per append made 200.
        #expect(capacities.count <= 24, "\(capacities.count) reallocations for 200 appends")
    }

    @Test("a dropped chunk is destroyed by the drop, not held until a compaction")
    func dropDestroysAtOnce() {
        var buffer = [UInt8](repeating: 0x41, count: 64)
        let address = buffer.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
        var queue = ChunkQueue()
        queue.append(Chunk(seq: 1, line: "A", encodedIn: buffer, 0..<1))  // the chunk shares the buffer
        // Ten live chunks behind it: dropping one does not compact the queue.
        var more = (2...11).map { Chunk(seq: UInt64($0), text: "t") }
        queue.append(moving: &more)
        queue.removeFirst(1)
        #expect(queue.count == 10 && queue.first?.seq == 2)
        // Written in place only if nothing else holds the buffer any more (a shared one is copied first).
        buffer[1] = 0x43
        #expect(buffer.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } == address)
    }
}
