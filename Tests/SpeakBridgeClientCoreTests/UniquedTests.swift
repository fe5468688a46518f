import Testing
@testable import SpeakBridgeClientCore

/// `uniquedInOrder` and `excluding` (the address lists' deduplication without a `Set` for short lists) give what
/// the `Set`-based filters gave, for short and long lists alike.
@Suite struct UniquedTests {
    static func reference(_ list: [Int]) -> [Int] {
        var seen = Set<Int>()
        return list.filter { seen.insert($0).inserted }
    }

    @Test(arguments: [0, 1, 5, 16, 17, 40, 300])
    func uniquedKeepsFirstOccurrencesInOrder(count: Int) {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20 {
            let list = (0..<count).map { _ in Int.random(in: 0..<max(1, count / 2), using: &generator) }
            #expect(list.uniquedInOrder() == Self.reference(list))
        }
    }

    @Test(arguments: [0, 3, 16, 17, 50])
    func excludingDropsExactlyTheExcluded(excludedCount: Int) {
        let list = Array(0..<60) + Array(0..<60)
        let excluded = (0..<excludedCount).map { $0 * 2 }
        #expect(list.excluding(excluded) == list.filter { !Set(excluded).contains($0) })
    }

    @Test func candidatesAreDeduplicatedInOrder() {
        let a = Candidate(host: "10.0.0.2", port: 1, source: "mdns")
        let b = Candidate(host: "10.0.0.3", port: 1, source: "mdns")
        #expect([a, b, a, b, a].uniquedInOrder() == [a, b])
        #expect([a, b, a].excluding([a]) == [b])
    }
}
