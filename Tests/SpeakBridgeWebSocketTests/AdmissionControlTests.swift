import Testing
@testable import SpeakBridgeWebSocket

/// The unauthenticated-connection rule as a pure value: per-address refusal, global eviction.
@Suite struct AdmissionControlTests {
    let a = AddressKey(ipLiteral: "10.0.0.2")!
    let b = AddressKey(ipLiteral: "10.0.0.3")!
    let c = AddressKey(ipLiteral: "10.0.0.1")!

    @Test func perAddressLimitRefusesAndRemovalFreesTheSlot() {
        var control = AdmissionControl<Int>(maxTotal: 10, maxPerAddress: 2)
        #expect(control.admit(1, from: a) == .admit(evicting: nil))
        #expect(control.admit(2, from: a) == .admit(evicting: nil))
        #expect(control.refuses(a))
        #expect(control.admit(3, from: a) == .refuse)
        #expect(control.admit(4, from: b) == .admit(evicting: nil))
        control.remove(1)
        #expect(!control.refuses(a))
        #expect(control.admit(5, from: a) == .admit(evicting: nil))
        #expect(control.count == 3)
        control.remove(99)  // unknown: ignored
        #expect(control.count == 3)
    }

    @Test func globalLimitEvictsTheOldestOfTheAddressHoldingTheMost() {
        var control = AdmissionControl<Int>(maxTotal: 4, maxPerAddress: 3)
        for id in 1...3 { #expect(control.admit(id, from: a) == .admit(evicting: nil)) }
        #expect(control.admit(4, from: b) == .admit(evicting: nil))
        // Full: c gets in, a (3 held) loses its oldest.
        #expect(control.admit(5, from: c) == .admit(evicting: 1))
        #expect(control.count(from: a) == 2)
        #expect(control.admit(6, from: b) == .admit(evicting: 2))
        // a: 3, b: 4 6, c: 5 → b holds the most (2): its oldest, 4, goes.
        #expect(control.admit(7, from: c) == .admit(evicting: 4))
        // a: 3, b: 6, c: 5 7 → c holds the most.
        #expect(control.admit(8, from: a) == .admit(evicting: 5))
        #expect(control.count == 4)
        #expect(!control.contains(5) && control.contains(8))
    }

    @Test func tiesGoToTheAddressWithTheOldestConnection() {
        var control = AdmissionControl<Int>(maxTotal: 2, maxPerAddress: 2)
        #expect(control.admit(1, from: b) == .admit(evicting: nil))
        #expect(control.admit(2, from: a) == .admit(evicting: nil))
        #expect(control.admit(3, from: c) == .admit(evicting: 1))
        // With the per-address limit at the total, one address alone evicts its own oldest.
        var single = AdmissionControl<Int>(maxTotal: 2, maxPerAddress: 2)
        _ = single.admit(1, from: a)
        _ = single.admit(2, from: a)
        #expect(single.admit(3, from: a) == .refuse)
    }

    /// A churning attacker on one address, and one on many, never keep a new address out.
    @Test func newAddressAlwaysGetsIn() {
        var control = AdmissionControl<Int>(maxTotal: 16, maxPerAddress: 4)
        var id = 0
        for round in 0..<1_000 {
            id += 1
            let attacker = AddressKey(bytes: [10, 0, UInt8(round % 7), 1])
            _ = control.admit(id, from: attacker)
            if round % 50 == 0 {
                id += 1
                let legit = AddressKey(bytes: [192, 168, 1, UInt8(round / 50)])
                #expect(control.admit(id, from: legit) != .refuse)
                #expect(control.contains(id))
            }
            #expect(control.count <= 16)
        }
    }

    /// A local user can bind any loopback address: one connection from each of 200 of them, reopened as they go,
    /// must not evict a phone's handshake under way. Before, every loopback address counted alone, the oldest of
    /// equals went first, and the phone's connection was evicted after 64 newer ones.
    @Test func manyLoopbackAddressesEvictOnlyEachOther() {
        var control = AdmissionControl<Int>(maxTotal: 64, maxPerAddress: 8)
        let phone = AddressKey(ipLiteral: "192.168.1.5")!
        #expect(control.admit(0, from: phone) == .admit(evicting: nil))
        for id in 1...1_000 {
            let local = AddressKey(bytes: [127, 0, UInt8(id / 200), UInt8(id % 200 + 2)])
            #expect(control.admit(id, from: local) != .refuse)
            #expect(control.contains(0), "the phone's connection was evicted by the loopback connection \(id)")
        }
        #expect(control.count == 64)
        // ::1 is loopback too.
        #expect(AddressKey(ipLiteral: "::1")?.evictionGroup == AddressKey(ipLiteral: "127.0.0.1")?.evictionGroup)
        #expect(AddressKey(ipLiteral: "10.0.0.1")?.evictionGroup == [10, 0, 0, 1])
    }

    /// One host of a home LAN holding 8 connections from its IPv6 address no longer locks out the other hosts of its
    /// /64 (before, the /64 was one address: the next host was refused at accept); one host rotating through its
    /// /64's addresses holds at most 32 and evicts its own.
    @Test func anIPv6HostDoesNotLockOutItsNeighbours() {
        var control = AdmissionControl<Int>(maxTotal: 64, maxPerAddress: 8)
        let attacker = AddressKey(ipLiteral: "2001:db8:1:2::a")!
        for id in 1...8 { #expect(control.admit(id, from: attacker) == .admit(evicting: nil)) }
        #expect(control.admit(9, from: attacker) == .refuse)
        let neighbour = AddressKey(ipLiteral: "2001:db8:1:2::b")!
        #expect(control.admit(100, from: neighbour) == .admit(evicting: nil))
        // Rotating: 1,000 addresses of the same /64, one connection each.
        for id in 1_000..<2_000 {
            let rotating = AddressKey(bytes: [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, UInt8(id / 256), UInt8(id % 256)])
            #expect(control.admit(id, from: rotating) != .refuse)
        }
        #expect(control.count <= 32)
        // The busiest address of the /64 (the attacker's 8) lost its connections first.
        #expect((1...8).allSatisfy { !control.contains($0) })
    }

    @Test func addressKeys() {
        #expect(AddressKey(ipLiteral: "127.0.0.2")?.bytes == [127, 0, 0, 2])
        #expect(AddressKey(ipLiteral: "::ffff:127.0.0.2") == AddressKey(ipLiteral: "127.0.0.2"))
        // IPv6 addresses are themselves, in their /64.
        #expect(AddressKey(ipLiteral: "2001:db8:1:2::1") != AddressKey(ipLiteral: "2001:db8:1:2:ffff::9"))
        #expect(AddressKey(ipLiteral: "2001:db8:1:2::1")?.prefix == AddressKey(ipLiteral: "2001:db8:1:2:ffff::9")?.prefix)
        #expect(AddressKey(ipLiteral: "2001:db8:1:2::1")?.prefix != AddressKey(ipLiteral: "2001:db8:1:3::1")?.prefix)
        #expect(AddressKey(ipLiteral: "2001:db8:1:2::1")?.description == "2001:db8:1:2:0:0:0:1")
        #expect(AddressKey(ipLiteral: "localhost") == nil)
    }
}
