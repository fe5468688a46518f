// `MDNSBrowser.browse(…, orComplete:)` against real avahi on the private test LAN (Tests/netns/lan.sh): what
// `discover` uses when this installation is paired with no desktop, so it cannot know who is still to answer.
import Testing
@testable import SpeakBridgeDiscovery

@Suite("browse until avahi's list is complete, on the private test LAN", .serialized,
       .enabled(if: TestLAN.current != nil, TestLAN.skipReason))
struct BrowseCompleteTests {
    let lan = TestLAN.current!

    @Test("orComplete: returns once avahi's first answers are in (ALL_FOR_NOW), with the peer's service resolved")
    func returnsWhenComplete() throws {
        let name = uniqueName("Complete")
        let peer = try lan.spawn(on: lan.peer, ["avahi-publish-service", name, MDNSConstants.serviceType, "4558", "v=1"])
        defer { peer.stop() }
        _ = try MDNSBrowser.browse(timeout: .seconds(10)) { $0.name == name }  // the peer is announced
        let start = ContinuousClock.now
        let services = try MDNSBrowser.browse(timeout: .seconds(30), untilList: nil, orComplete: true)
        #expect(ContinuousClock.now - start < .seconds(15))  // avahi says "all for now" after about 1 s
        #expect(services.first { $0.name == name }?.port == 4558)
    }

    @Test("without orComplete and with nothing to wait for, browse listens for its whole timeout")
    func listensWholeTimeoutOtherwise() throws {
        let start = ContinuousClock.now
        _ = try MDNSBrowser.browse(timeout: .seconds(3), untilList: nil)
        #expect(ContinuousClock.now - start >= .seconds(3))
    }
}
