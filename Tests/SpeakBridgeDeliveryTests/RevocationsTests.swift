import SpeakBridgeProtocol
import Testing
@testable import SpeakBridgeDelivery

@Suite("Revocations")
struct RevocationsTests {
    let a = DeviceID(publicKeyDigest: Array(repeating: 1, count: 32))
    let b = DeviceID(publicKeyDigest: Array(repeating: 2, count: 32))

    @Test func itemsAcceptedBeforeTheirDevicesRevocationAreStale() {
        var r = Revocations()
        #expect(!r.isStale(a, generation: 0))
        let first = r.revoke(a)
        #expect(first == 1 && r.count == 1)
        #expect(r.isStale(a, generation: 0))
        #expect(!r.isStale(a, generation: first))  // accepted after: the device paired again
        #expect(!r.isStale(b, generation: 0))  // another device
        let second = r.revoke(a)
        #expect(r.isStale(a, generation: first) && !r.isStale(a, generation: second))
    }

    @Test func adoptingAnotherCountKeepsTheLatest() {
        var r = Revocations()
        r.adopt(a, at: 5)
        r.adopt(a, at: 3)
        #expect(r.isStale(a, generation: 4) && !r.isStale(a, generation: 5) && r.count == 5)
        #expect(r.revoke(b) == 6)
    }
}
