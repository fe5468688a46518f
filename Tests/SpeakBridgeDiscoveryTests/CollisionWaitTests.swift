import Testing
@testable import SpeakBridgeDiscovery

/// After an mDNS group collision the next name is probed after a random wait that grows with each collision in a
/// row (MDNSPublisher.swift, step 2): two desktops told of a collision together must not stay in step. The LAN test
/// (Tests/netns, section 5b) starts two such desktops; this checks the waits' bounds and that they vary.
@Suite struct CollisionWaitTests {
    @Test func theWaitGrowsWithCollisionsInARowUpToSixSeconds() {
        for (collisions, most) in [(1, 1_500), (2, 3_000), (3, 6_000), (4, 6_000), (50, 6_000)] {
            let waits = (0..<400).map { _ in PublisherCore.collisionWait(collisions) }
            #expect(waits.allSatisfy { (0...most).contains($0) }, "collision \(collisions): \(waits.max() ?? -1)")
            // Random, not fixed: two hosts drawing 400 times each would be in step for all of them otherwise.
            #expect(Set(waits).count > 100, "collision \(collisions)")
            #expect(waits.contains { $0 > most / 2 }, "collision \(collisions): the upper half is reached")
        }
        #expect((0..<100).allSatisfy { _ in PublisherCore.collisionWait(0) <= 1_500 })
    }
}
