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

/// `outbox release` is crash-safe at every step (OutboxShelf's doc): the lines of a held file are queued in the live
/// journal in one atomic replace that also names the file as released, and only then is the file removed. These
/// tests put back a released held file by hand, as a kill after the live journal was replaced and before the file's
/// removal leaves it (or a power cut that lost the removal): whatever opens the journal next must not queue its
/// lines a second time. Before: a release again queued them twice (sent twice).
@Suite("Outbox release: a held file left after its lines were queued")
struct ReleaseCrashTests: JournalFixture {
    let root = "/tmp/sb-release-crash-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    let stamp = Date(timeIntervalSince1970: 1_700_000_000)
    var held: String { home.outboxDirectory + "/" + device.compact + ".held-1700000000.journal" }

    /// "a", "b" held (an earlier pairing), "new" queued live, then released; returns the held file's bytes, which
    /// `putBack` restores: the state a kill right after the release's journal replace leaves.
    func releaseOnce() throws -> [UInt8] {
        do {
            let box = try Outbox(home: home, desktop: device)
            _ = try box.append(texts: ["a", "b"])
        }
        #expect(try OutboxShelf.hold(home: home, desktop: device, now: stamp) == 2)
        do {
            let box = try Outbox(home: home, desktop: device)
            _ = try box.append(texts: ["new"])
        }
        let bytes = try #require(try FileIO.read(held))
        #expect(try OutboxShelf.release(home: home, desktop: device) == 2)
        #expect(!FileIO.exists(held))
        return bytes
    }

    func putBack(_ bytes: [UInt8]) {
        let fd = open(held, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    /// The lines queued live and held, from a fresh load of every journal.
    func queued() throws -> (live: [String], held: [String]) {
        var live: [String] = [], held: [String] = []
        for entry in try OutboxShelf.list(home: home) where entry.desktop == device.compact {
            let loaded = try Outbox.load(entry.path)
            let texts = loaded.chunks.filter { $0.seq > loaded.acked }.map(\.text)
            if entry.held { held += texts } else { live += texts }
        }
        return (live, held)
    }

    @Test("a release again queues nothing twice and removes the file")
    func releaseAgain() throws {
        defer { cleanup() }
        putBack(try releaseOnce())
        #expect(try queued().live == ["new", "a", "b"])
        #expect(try queued().held == [], "listed as queued, not held: the live journal names the file as released")
        #expect(try OutboxShelf.release(home: home, desktop: device) == 0, "before: 2, \"a\" and \"b\" queued twice")
        #expect(!FileIO.exists(held))
        #expect(try Outbox(home: home, desktop: device).pending.map(\.text) == ["new", "a", "b"])
    }

    @Test("the next send's open removes the file; its lines go out once, a later release finds nothing")
    func sendFinishesIt() throws {
        defer { cleanup() }
        putBack(try releaseOnce())
        do {
            let box = try Outbox(home: home, desktop: device)
            #expect(box.pending.map(\.text) == ["new", "a", "b"])
            #expect(!FileIO.exists(held))
            let records = String(decoding: try LogFile.readRecords(path) ?? [], as: UTF8.self)
            #expect(!records.contains(#"{"released":"#), "the names are compacted away once settled")
        }
        #expect(try OutboxShelf.release(home: home, desktop: device) == 0)
        #expect(try queued().live == ["new", "a", "b"])
    }

    @Test("a new pairing (hold) removes the file before it moves the journal aside: a release then queues each line once")
    func holdFinishesIt() throws {
        defer { cleanup() }
        putBack(try releaseOnce())
        #expect(try OutboxShelf.hold(home: home, desktop: device, now: stamp.addingTimeInterval(60)) == 3)
        #expect(!FileIO.exists(held))
        #expect(try queued().held == ["new", "a", "b"])
        #expect(try OutboxShelf.release(home: home, desktop: device) == 3)
        #expect(try queued() == (live: ["new", "a", "b"], held: []))
    }

    @Test("clear counts the file's lines as queued, not held; a clear of everything removes it too")
    func clearFinishesIt() throws {
        defer { cleanup() }
        let bytes = try releaseOnce()
        putBack(bytes)
        #expect(try OutboxShelf.clear(home: home, desktop: device.compact, heldOnly: true) == 0, "nothing is held")
        #expect(try queued().live == ["new", "a", "b"])
        if !FileIO.exists(held) { putBack(bytes) }
        #expect(try OutboxShelf.clear(home: home, desktop: device.compact, heldOnly: false) == 3)
        #expect(!FileIO.exists(held), "else its lines would come back as held")
        #expect(try OutboxShelf.list(home: home).isEmpty)
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
