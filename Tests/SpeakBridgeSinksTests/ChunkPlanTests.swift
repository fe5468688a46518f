import Testing
@testable import SpeakBridgeSinks

@Suite struct ChunkPlanTests {
    static func frames(_ sizes: [Int]) -> [[UInt8]] {
        sizes.map { [UInt8](repeating: 0x61, count: $0 - 1) + [0x0A] }
    }

    /// Walks the whole plan; returns each chunk's (length, completes).
    static func walk(_ plan: ChunkPlan) -> [(Int, Int)] {
        var position = 0
        var chunks: [(Int, Int)] = []
        while position < plan.stream.count {
            let (range, completes) = plan.chunk(from: position)
            #expect(range.lowerBound == position && !range.isEmpty && range.count <= plan.limit)
            chunks.append((range.count, completes))
            position = range.upperBound
        }
        return chunks
    }

    @Test func packsWholeTextsUpToTheLimit() {
        let plan = ChunkPlan(frames: Self.frames([40, 40, 40, 30]), limit: 100)
        #expect(Self.walk(plan).map(\.0) == [80, 70])
        #expect(Self.walk(plan).map(\.1) == [2, 4])
    }

    @Test func cutsOnlyTextsLongerThanTheLimit() {
        // 250-byte text: 100 + 100 + its 50-byte tail together with the next 30-byte text.
        let plan = ChunkPlan(frames: Self.frames([10, 250, 30]), limit: 100)
        #expect(Self.walk(plan).map(\.0) == [10, 100, 100, 80])
        #expect(Self.walk(plan).map(\.1) == [1, 1, 1, 3])
    }

    @Test func exactFitAndCompletedCounts() {
        let plan = ChunkPlan(frames: Self.frames([100, 100]), limit: 100)
        #expect(Self.walk(plan).map(\.1) == [1, 2])
        #expect(plan.completed(at: 0) == 0 && plan.completed(at: 99) == 0 && plan.completed(at: 100) == 1)
        #expect(plan.completed(at: 200) == 2)
        #expect(plan.start(ofFrame: 1) == 100)
    }

    @Test func resumesFromTheMiddleOfAText() {
        let plan = ChunkPlan(frames: Self.frames([250, 20]), limit: 100)
        let (range, completes) = plan.chunk(from: 130)
        #expect(range == 130..<230 && completes == 0)
        #expect(plan.chunk(from: 230).range == 230..<270)
        #expect(plan.chunk(from: 230).completes == 2)
    }
}
