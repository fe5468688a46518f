import Testing
@testable import SpeakBridgeDelivery

/// One device's backlog never sits in front of another device's line.
@Suite("Fair sink queue")
struct FairQueueTests {
    func take(_ q: inout FairQueue<String, Int>, limit: Int = 3, partial: Int? = nil) -> (String, [Int])? {
        guard let (key, items) = q.next(limit: limit, budget: .max, weight: { _ in 1 }) else { return nil }
        q.consume(key, taken: partial ?? items.count, of: items.count)
        return (key, Array(items.prefix(partial ?? items.count)))
    }

    @Test func keysAreServedRoundRobinAndInOrderWithinAKey() {
        var q = FairQueue<String, Int>()
        q.append("flood", Array(1...10))
        q.append("other", [100])
        #expect(take(&q)! == ("flood", [1, 2, 3]))
        #expect(take(&q)! == ("other", [100]))  // next, not after all of flood's backlog
        #expect(take(&q)! == ("flood", [4, 5, 6]))
        #expect(q.count == 4)
    }

    @Test func aPartlyTakenBatchStaysInFront() {
        var q = FairQueue<String, Int>()
        q.append("a", [1, 2, 3, 4])
        q.append("b", [9])
        #expect(take(&q, partial: 1)! == ("a", [1]))
        #expect(take(&q)! == ("a", [2, 3, 4]))  // the sink may hold half of 2: a goes on first
        #expect(take(&q)! == ("b", [9]))
        #expect(q.isEmpty)
        #expect(take(&q) == nil)
    }

    @Test func aKeyHeldForItsOwnReasonGoesBehindTheOthersInOrder() {
        var q = FairQueue<String, Int>()
        q.append("held", [1, 2, 3])
        q.append("b", [9])
        let (key, items) = q.next(limit: 3, budget: .max, weight: { _ in 1 })!
        #expect(key == "held" && items == [1, 2, 3])
        q.consume("held", taken: 0, of: 3, behind: true)  // the sink holds none of it: "b" goes first
        #expect(take(&q)! == ("b", [9]))
        q.append("c", [7])
        let again = q.next(limit: 3, budget: .max, weight: { _ in 1 })!
        #expect(again.key == "held" && again.items == [1, 2, 3])
        q.consume("held", taken: 1, of: 3, behind: true)  // part of it taken: the rest still waits its turn
        #expect(take(&q)! == ("c", [7]))
        #expect(take(&q)! == ("held", [2, 3]))
        #expect(q.isEmpty && q.keyCount == 0)
    }

    @Test func theBudgetBoundsABatchButAlwaysTakesOne() {
        var q = FairQueue<String, Int>()
        q.append("a", [5_000, 10, 10])
        let first = q.next(limit: 10, budget: 100, weight: { $0 })
        #expect(first?.items == [5_000])
        q.consume("a", taken: 1, of: 1)
        #expect(q.next(limit: 10, budget: 100, weight: { $0 })?.items == [10, 10])
    }

    @Test func removingALanesItemsKeepsTheRestInOrder() {
        var q = FairQueue<String, Int>()
        q.append("a", [1, 2, 3, 4])
        q.append("b", [9])
        q.removeAll("a") { $0 % 2 == 0 }
        #expect(q.count == 3)
        #expect(take(&q)! == ("a", [1, 3]))
        q.append("a", [5])
        q.removeAll("a") { _ in true }  // the whole lane: its place in the round goes too
        q.removeAll("zzz") { _ in true }
        #expect(q.count == 1)
        #expect(take(&q)! == ("b", [9]))
        #expect(q.isEmpty && take(&q) == nil)
    }
}
