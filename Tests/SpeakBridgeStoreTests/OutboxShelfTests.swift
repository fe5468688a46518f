#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
@testable import SpeakBridgeStore

@Suite("Outbox shelf and device matching")
struct OutboxShelfTests {
    let root = "/tmp/sb-shelf-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    var home: Home { Home.resolve(override: root, environment: [:]) }
    func cleanup() { try? FileManager.default.removeItem(atPath: root) }

    @Test func twoDevicesWithOneNameAreAmbiguous() throws {
        defer { cleanup() }
        let store = try PeerStore(home: home)
        for name in ["vm", "vm", "desk"] {
            // IDs that do not start with "VM": one that did would be named by the query too (NameAndPrefixTests).
            var key = X25519PrivateKey().publicKey
            while KeySchedule.deviceID(of: key).compact.hasPrefix("VM") { key = X25519PrivateKey().publicKey }
            try store.upsert(Peer(name: name, publicKey: key, psk: SymmetricKey.random(), role: .client))
        }
        #expect(store.matches("vm").count == 2)
        #expect(store.find("vm") == nil)
        let desk = try #require(store.matches("desk").first)
        #expect(store.find("desk")?.id == desk.id)
        #expect(store.matches(desk.id.description).map(\.id) == [desk.id])
        #expect(store.matches("nobody").isEmpty)
    }

    @Test func holdReleaseAndClear() throws {
        defer { cleanup() }
        let desktop = KeySchedule.deviceID(of: X25519PrivateKey().publicKey)
        do {
            let box = try Outbox(home: home, desktop: desktop)
            _ = try box.append(texts: ["old 1", "old 2"])
            try box.markAcked(1)
        }
        // A new pairing: the unacknowledged line is held, the live journal is gone.
        let lock = try OutboxShelf.lock(home: home, desktop: desktop)
        #expect(throws: StoreError.self) { _ = try OutboxShelf.lock(home: home, desktop: desktop) }
        #expect(try OutboxShelf.hold(home: home, desktop: desktop) == 1)
        close(lock)
        var entries = try OutboxShelf.list(home: home)
        #expect(entries.count == 1 && entries[0].held && entries[0].oldest == "old 2")
        #expect(try Outbox(home: home, desktop: desktop).pending.isEmpty, "held lines are not sent")
        do {
            let box = try Outbox(home: home, desktop: desktop)
            _ = try box.append(texts: ["new"])
        }
        #expect(try OutboxShelf.release(home: home, desktop: desktop) == 1)
        let box = try Outbox(home: home, desktop: desktop)
        #expect(box.pending.map(\.text) == ["new", "old 2"])
        entries = try OutboxShelf.list(home: home)
        #expect(entries.count == 1 && !entries[0].held && entries[0].count == 2)
        // A running send (the open Outbox holds the lock) makes clear refuse.
        #expect(throws: StoreError.self) { _ = try OutboxShelf.clear(home: home, desktop: desktop.compact, heldOnly: false) }
    }
}

/// A name that is also the start of another device's ID names two devices: `find` gives neither (before: the other
/// device alone, so `--to vm` could have meant "desk"; OutboxShelfTests' random IDs hit it about 3 runs in 1,024).
@Suite("Device matching: a name that is another device's ID prefix")
struct NameAndPrefixTests {
    @Test func aNameThatIsAnotherDevicesIDPrefixIsAmbiguous() throws {
        let root = "/tmp/sb-prefix-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let store = try PeerStore(home: Home.resolve(override: root, environment: [:]))
        func key(prefixed: Bool) -> X25519PublicKey {
            while true {
                let key = X25519PrivateKey().publicKey
                if KeySchedule.deviceID(of: key).compact.hasPrefix("VM") == prefixed { return key }
            }
        }
        try store.upsert(Peer(name: "vm", publicKey: key(prefixed: false), psk: SymmetricKey.random(), role: .client))
        try store.upsert(Peer(name: "desk", publicKey: key(prefixed: true), psk: SymmetricKey.random(), role: .client))
        #expect(Set(store.matches("vm").map(\.name)) == ["vm", "desk"])
        #expect(store.find("vm") == nil)
        #expect(store.find("desk")?.name == "desk")
    }
}
