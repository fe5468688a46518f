#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
@testable import SpeakBridgeStore

/// `send` skips two pieces of start-up work when they would do nothing: counting held lines when no held journal
/// of the desktop is there by name (`OutboxShelf.mayHoldLines`), and handing "last seen" to another thread when
/// `PeerStore.seen` would not write (`wouldRecord`). Each skip must agree with the work it skips.
@Suite("Start-up work skipped only when it would do nothing", .serialized)
struct StartupSkipTests {
    let root = "/tmp/sb-skip-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    var home: Home { Home.resolve(override: root, environment: [:]) }
    func cleanup() { try? FileManager.default.removeItem(atPath: root) }

    func touch(_ name: String) {
        let fd = open(home.outboxDirectory + "/" + name, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        close(fd)
    }

    /// Wherever `mayHoldLines` says no, `heldCount` is 0; with a held journal of the desktop it says yes.
    @Test func noHeldNameMeansNoHeldLines() throws {
        defer { cleanup() }
        let desktop = KeySchedule.deviceID(of: X25519PrivateKey().publicKey)
        let other = KeySchedule.deviceID(of: X25519PrivateKey().publicKey)
        func agree() {
            if !OutboxShelf.mayHoldLines(home: home, desktop: desktop) {
                #expect(OutboxShelf.heldCount(home: home, desktop: desktop) == 0)
            }
        }
        #expect(OutboxShelf.mayHoldLines(home: home, desktop: desktop), "no directory yet: heldCount decides")
        try home.prepare()
        #expect(!OutboxShelf.mayHoldLines(home: home, desktop: desktop))
        agree()
        // A live journal with lines, held lines of another desktop, and names that only look alike.
        do {
            let box = try Outbox(home: home, desktop: desktop)
            _ = try box.append(texts: ["live"])
        }
        do {
            let box = try Outbox(home: home, desktop: other)
            _ = try box.append(texts: ["other's"])
        }
        #expect(try OutboxShelf.hold(home: home, desktop: other) == 1)
        touch(desktop.compact + ".held-123.journal.lock")
        touch(desktop.compact + ".held-123.txt")
        touch("x" + desktop.compact + ".held-123.journal")
        #expect(!OutboxShelf.mayHoldLines(home: home, desktop: desktop))
        agree()
        #expect(OutboxShelf.heldCount(home: home, desktop: other) == 1)
        #expect(OutboxShelf.mayHoldLines(home: home, desktop: other))
        // The desktop's own lines held (a new pairing): seen by name, and counted.
        #expect(try OutboxShelf.hold(home: home, desktop: desktop) == 1)
        #expect(OutboxShelf.mayHoldLines(home: home, desktop: desktop))
        #expect(OutboxShelf.heldCount(home: home, desktop: desktop) == 1)
    }

    /// `wouldRecord` is true exactly when `seen` with the same arguments writes.
    @Test func wouldRecordAgreesWithSeen() throws {
        defer { cleanup() }
        let store = try PeerStore(home: home)
        let key = X25519PrivateKey().publicKey
        let unknown = X25519PrivateKey().publicKey
        try store.upsert(Peer(name: "desk", publicKey: key, psk: SymmetricKey.random(), role: .desktop,
                              addresses: ["127.0.0.1"], port: 4000))
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let cases: [(Date, (host: String, port: Int)?)] = [
            (t0, ("127.0.0.1", 4000)),                       // never seen: writes
            (t0.addingTimeInterval(10), ("127.0.0.1", 4000)),   // same address, 10 s later: does not
            (t0.addingTimeInterval(20), nil),                   // no address, 20 s: does not
            (t0.addingTimeInterval(30), ("127.0.0.2", 4000)),   // moved: writes
            (t0.addingTimeInterval(40), ("127.0.0.2", 4001)),   // other port: writes
            (t0.addingTimeInterval(200), ("127.0.0.2", 4001)),  // a minute later: writes
            (t0.addingTimeInterval(100), ("127.0.0.2", 4001)),  // the clock went back: writes
        ]
        for (now, address) in cases {
            let predicted = store.wouldRecord(key: key, now: now, address: address, keep: 8)
            let wrote = try store.seen(key: key, now: now, address: address, keep: 8)
            #expect(predicted == wrote, "\(now) \(String(describing: address))")
        }
        #expect(store.wouldRecord(key: unknown, now: t0) == (try store.seen(key: unknown, now: t0)))
    }
}
