#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeControl
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
@testable import SpeakBridgeStore
import SpeakBridgeSupport
import SpeakBridgeDelivery

@Suite("Local state files")
struct StoreTests {
    let root = "/tmp/sb-store-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    var home: Home { Home.resolve(override: root, environment: [:]) }
    let device = DeviceID(publicKeyDigest: SHA256.hash(Array("device".utf8)))

    func cleanup() { try? FileManager.default.removeItem(atPath: root) }

    @Test func homeLayoutAndOverride() {
        let h = Home.resolve(override: nil, environment: ["SPEAKBRIDGE_HOME": "/x/y", "HOME": "/home/u"])
        #expect(h == Home(config: "/x/y/config", state: "/x/y/state", runtime: "/x/y/run", root: "/x/y"))
        let xdg = Home.resolve(override: nil, environment: [
            "HOME": "/home/u", "XDG_CONFIG_HOME": "/c", "XDG_STATE_HOME": "/s", "XDG_RUNTIME_DIR": "/r"])
        #expect(xdg == Home(config: "/c/speakbridge", state: "/s/speakbridge", runtime: "/r/speakbridge"))
        #expect(Home.resolve(override: "/o", environment: ["SPEAKBRIDGE_HOME": "/x"]).config == "/o/config")
    }

    @Test func identityIsCreatedOncePrivateAndStable() throws {
        defer { cleanup() }
        let a = try Identity.loadOrCreate(home)
        let b = try Identity.loadOrCreate(home)
        #expect(a.publicKey == b.publicKey)
        #expect(FileIO.mode(home.identityFile) == 0o600)
        #expect(FileIO.mode(home.config) == 0o700)
        chmod(home.identityFile, 0o644)
        #expect(throws: StoreError.self) { try Identity.loadOrCreate(home) }
    }

    @Test func damagedIdentityIsAClearError() throws {
        defer { cleanup() }
        try home.prepare()
        try FileIO.atomicWrite(home.identityFile, Array("not a key\n".utf8))
        do {
            _ = try Identity.loadOrCreate(home)
            Issue.record("accepted a damaged key")
        } catch {
            #expect(error.message.contains("not a SpeakBridge identity key"))
            #expect(error.hint != nil)
        }
    }

    /// A time out of range in an edited or damaged peers.json is held to 0 … 2^40 s: before, writing it back
    /// (`seen`, at every connection) trapped on `Int64(9.2e18)`.
    @Test func aHugeTimeInPeersJSONCannotTrap() throws {
        defer { cleanup() }
        let store = try PeerStore(home: home)
        let key = X25519PrivateKey().publicKey
        try store.upsert(Peer(name: "pixel", publicKey: key, psk: SymmetricKey.random(), role: .client))
        let path = home.state + "/peers.json"
        let text = String(decoding: try #require(try FileIO.read(path)), as: UTF8.self)
        let edited = text.replacingOccurrences(of: #"("pairedAt":)\d+"#, with: "$19223372036854775807",
                                               options: .regularExpression)
        #expect(edited != text)
        try FileIO.atomicWrite(path, Array(edited.utf8))
        let reloaded = try PeerStore(home: home)
        #expect(try reloaded.seen(key: key, now: Date(timeIntervalSince1970: 1_700_000_000)))
        let again = try PeerStore(home: home)
        #expect(again.all.first?.pairedAt == Date(timeIntervalSince1970: Double(Int64(1) << 40)))
    }

    @Test func peersRoundTripAndFind() throws {
        defer { cleanup() }
        let store = try PeerStore(home: home)
        let key = X25519PrivateKey().publicKey
        let psk = SymmetricKey.random()
        try store.upsert(Peer(name: "pixel", publicKey: key, psk: psk, role: .client,
                              addresses: ["10.0.0.2"], port: 47810))
        let again = try PeerStore(home: home)
        let peer = try #require(again.all.first)
        #expect(peer.name == "pixel" && peer.publicKey == key && peer.addresses == ["10.0.0.2"])
        #expect(peer.psk == psk)
        let text = String(decoding: try #require(try FileIO.read(home.peersFile)), as: UTF8.self)
        #expect(text.contains("\"psk\":\"" + Hex.encode(psk.copyBytes()) + "\""))
        #expect(again.find(peer.id.description)?.id == peer.id)
        #expect(again.find(peer.id.compact.lowercased())?.id == peer.id)
        #expect(again.find(String(peer.id.compact.prefix(4)))?.id == peer.id)
        #expect(again.find("pixel")?.id == peer.id)
        #expect(again.find("nobody") == nil)
        #expect(FileIO.mode(home.peersFile) == 0o600)
        try again.remove(id: peer.id)
        #expect(try PeerStore(home: home).all.isEmpty)
    }

    @Test func pskHexGoesStraightIntoAKeyAndBadHexIsRefused() throws {
        let key = SymmetricKey.random()
        var out: [UInt8] = []
        key.appendHex(to: &out)
        #expect(out == Array(Hex.encode(key.copyBytes()).utf8))
        let text = String(decoding: out, as: UTF8.self)
        #expect(SymmetricKey(hex: text) == key)
        #expect(SymmetricKey(hex: text.uppercased()) == key)
        #expect(SymmetricKey(hex: String(text.dropLast())) == nil)
        #expect(SymmetricKey(hex: text + "00") == nil)
        #expect(SymmetricKey(hex: "zz" + text.dropFirst(2)) == nil)
        #expect(SymmetricKey.random() != key)
        SecretMemory.wipe(&out)
        #expect(out.isEmpty)
    }

    @Test func aPeersFileWithABadPskIsDamaged() throws {
        defer { cleanup() }
        try home.prepare()
        let key = Hex.encode(X25519PrivateKey().publicKey.rawRepresentation)
        for psk in [String(repeating: "a", count: 63), String(repeating: "g", count: 64), ""] {
            try FileIO.atomicWrite(home.peersFile, Array(#"{"version":1,"peers":[{"name":"x","role":"client","publicKey":"\#(key)","psk":"\#(psk)","pairedAt":0}]}"#.utf8))
            #expect(throws: StoreError.self) { try PeerStore(home: home) }
        }
    }

    @Test func damagedPeersFileIsAClearError() throws {
        defer { cleanup() }
        try home.prepare()
        try FileIO.atomicWrite(home.peersFile, Array("{\"peers\":[{\"name\":1}]}".utf8))
        #expect(throws: StoreError.self) { try PeerStore(home: home) }
    }

    @Test func progressLogKeepsTheLatestAndIgnoresATornLine() throws {
        defer { cleanup() }
        try home.prepare()
        do {
            let log = try ProgressLog(path: home.progressFile)
            try log.record(sink: "fifo:/x", device: device, session: "s", seq: 5)
            try log.record(sink: "fifo:/x", device: device, session: "s", seq: 9)
            try log.record(sink: "stdout", device: device, session: "s", seq: 7)
            try log.sync()
        }
        // A kill in the middle of a write leaves half a line.
        let fd = try FileIO.openAppend(home.progressFile)
        try FileIO.writeAll(fd, Array("[\"stdout\",\"\(device)\",\"s\",12".utf8), path: "test")
        close(fd)
        let reopened = try ProgressLog(path: home.progressFile)
        #expect(reopened.progress(sink: "fifo:/x", device: device, session: "s") == 9)
        #expect(reopened.progress(sink: "stdout", device: device, session: "s") == 7)
        // Compacted on open: one line per key.
        let text = String(decoding: try #require(try LogFile.readRecords(home.progressFile)), as: UTF8.self)
        #expect(text.split(separator: "\n").count == 2)
        try reopened.forget(device: device)
        #expect(reopened.entries().isEmpty)
    }

    @Test func outboxResendsOnlyWhatWasNotAcknowledged() throws {
        defer { cleanup() }
        var session = ""
        do {
            let outbox = try Outbox(home: home, desktop: device)
            session = outbox.session
            let chunks = try outbox.append(texts: ["a", "b", "c", "d"])
            #expect(chunks.map(\.seq) == [1, 2, 3, 4])
            try outbox.markAcked(2)
            #expect(outbox.acked == 2)
        }
        // Torn last line: the chunk was never sent, so dropping it loses nothing acknowledged.
        let path = home.outboxDirectory + "/" + device.compact + ".journal"
        let fd = try FileIO.openAppend(path)
        try FileIO.writeAll(fd, Array("{\"c\":{\"seq\":5,\"te".utf8), path: path)
        close(fd)
        do {
            let again = try Outbox(home: home, desktop: device)
            #expect(again.session == session)
            #expect(again.acked == 2)
            #expect(again.pending.map(\.text) == ["c", "d"])
            #expect(try again.append(texts: ["e"]).first?.seq == 5)
            #expect(FileIO.mode(path) == 0o600)
        }
        // The torn line was compacted away, so "e" is a whole record of its own for the next run.
        let third = try Outbox(home: home, desktop: device)
        #expect(third.pending.map(\.text) == ["c", "d", "e"])
        #expect(third.nextSeq == 6)
    }

    /// A small, whole journal is appended to as it is (no rewrite, no fsyncs at start); a large one is compacted.
    @Test func outboxCompactsOnlyWhenLargeOrTorn() throws {
        defer { cleanup() }
        let path = home.outboxDirectory + "/" + device.compact + ".journal"
        func inode() throws -> UInt64 {
            var st = stat()
            try #require(stat(path, &st) == 0)
            return UInt64(st.st_ino)
        }
        do {
            let outbox = try Outbox(home: home, desktop: device)
            _ = try outbox.append(texts: ["a", "b", "c"])
            try outbox.markAcked(2)
        }
        let small = try inode()
        do {
            let outbox = try Outbox(home: home, desktop: device)
            #expect(try inode() == small)
            #expect(outbox.pending.map(\.text) == ["c"])
            #expect(outbox.nextSeq == 4)
            _ = try outbox.append(texts: [String(repeating: "x", count: Outbox.compactAbove)])
            try outbox.markAcked(4)
        }
        let large = try inode()
        let outbox = try Outbox(home: home, desktop: device)
        #expect(try inode() != large)
        #expect(outbox.pending.isEmpty)
        #expect(outbox.acked == 4 && outbox.nextSeq == 5)
        #expect((try LogFile.readRecords(path)?.count ?? 0) < 200)
    }

    /// "Last seen" is written at most once a minute unless an address changes: a script's many one-shot sends and
    /// a desktop's many reconnecting devices do not each pay two fsyncs for it.
    @Test func peerSeenWritesOnlyWhatChanges() throws {
        defer { cleanup() }
        let store = try PeerStore(home: home)
        let key = X25519PrivateKey().publicKey
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        try store.upsert(Peer(name: "desk", publicKey: key, psk: SymmetricKey.random(), role: .desktop, lastSeen: t0, addresses: ["10.0.0.2"], port: 47810))
        #expect(try store.seen(key: key, now: t0.addingTimeInterval(30), address: ("10.0.0.2", 47810)) == false)
        #expect(try store.seen(key: key, now: t0.addingTimeInterval(30)) == false)
        #expect(try store.seen(key: key, now: t0.addingTimeInterval(31), address: ("10.0.0.3", 47810), keep: 2) == true)
        #expect(store.all.first?.addresses == ["10.0.0.3", "10.0.0.2"])
        #expect(try store.seen(key: key, now: t0.addingTimeInterval(40), address: ("10.0.0.3", 47811)) == true)
        #expect(try store.seen(key: key, now: t0.addingTimeInterval(99)) == false)   // 59 s after the last write
        #expect(try store.seen(key: key, now: t0.addingTimeInterval(100)) == true)
        // Written through: a fresh store reads the last time.
        #expect(try PeerStore(home: home).all.first?.lastSeen == t0.addingTimeInterval(100))
        #expect(try PeerStore(home: home).all.first?.port == 47811)
    }

    /// A reader of peers.json's list never waits for a mutation in progress: the daemon's service thread asks
    /// `wouldRecord` at every handshake while another thread may be writing the file (two fsyncs, seconds on a
    /// stalled disk). Held here inside the mutation's change (which, with the file work after it, is outside the
    /// list's lock); before, the whole mutation held the one lock and the readers below waited for it.
    @Test func readersDoNotWaitForAMutationInProgress() throws {
        defer { cleanup() }
        let store = try PeerStore(home: home)
        let key = X25519PrivateKey().publicKey
        try store.upsert(Peer(name: "desk", publicKey: key, psk: SymmetricKey.random(), role: .client))
        let inside = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let written = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? store.mutate { peers in
                inside.signal()
                release.wait()
                peers[0].name = "renamed"
            }
            written.signal()
        }
        inside.wait()
        let read = DispatchSemaphore(value: 0)
        let seen = Locked<(names: [String], would: Bool)?>(nil)
        Thread.detachNewThread {
            let result = (store.all.map(\.name), store.wouldRecord(key: key))
            seen.withLock { $0 = result }
            read.signal()
        }
        let readWhileHeld = read.wait(timeout: .now() + 10) == .success
        release.signal()
        written.wait()
        if !readWhileHeld { read.wait() }
        #expect(readWhileHeld, "a reader waited for the mutation")
        // What it read is the list before the mutation (which was not written yet); after it, the new one.
        #expect(seen.withLock { $0?.names } == ["desk"])
        #expect(seen.withLock { $0?.would } == true)
        #expect(store.all.map(\.name) == ["renamed"])
        #expect(try PeerStore(home: home).all.map(\.name) == ["renamed"])
    }

    @Test func outboxIsExclusive() throws {
        defer { cleanup() }
        var first: Outbox? = try Outbox(home: home, desktop: device)
        // A second opener in another thread waits until the first is gone.
        let flag = Flag()
        let h = home, d = device
        Thread.detachNewThread {
            let second = try? Outbox(home: h, desktop: d) { flag.set(waited: true) }
            flag.set(opened: second != nil)
        }
        usleep(300_000)
        #expect(flag.state == (true, false))   // waiting, not opened
        first = nil
        _ = first
        let deadline = Date().addingTimeInterval(5)
        while flag.state.1 == false && Date() < deadline { usleep(10_000) }
        #expect(flag.state == (true, true))
    }

    @Test func atomicWriteReportsAFullDiskWithAHint() {
        let error = StoreError.io("write", "/x", errno: ENOSPC)
        #expect(error.message.contains("No space left"))
        #expect(error.hint?.contains("free some disk space") == true)
    }

    @Test func controlSocketAnswersAndRefusesASecondDaemon() throws {
        defer { cleanup() }
        try home.prepare()
        let server = try ControlServer(path: home.controlSocket) { request in
            JSONValue.object([("ok", .bool(true)), ("echo", request["cmd"] ?? .null)])
        }
        defer { server.stop() }
        let reply = try ControlClient.request(home: home, .object([("cmd", .string("status"))]))
        #expect(reply["echo"] == .string("status"))
        #expect(FileIO.mode(home.controlSocket) == 0o600)
        #expect(throws: StoreError.self) { try ControlServer(path: home.controlSocket) { _ in .null } }
    }

    @Test func noDaemonIsAClearError() throws {
        defer { cleanup() }
        do {
            _ = try ControlClient.request(home: home, .object([("cmd", .string("status"))]))
            Issue.record("no error without a daemon")
        } catch {
            #expect(error.message.contains("no speakbridge daemon is running"))
            #expect(error.noDaemon)
            #expect(error.hint?.contains("speakbridge serve") == true)
        }
    }
}

final class Flag: @unchecked Sendable {
    let lock = NSLock()
    var waited = false
    var opened = false
    func set(waited w: Bool) { lock.withLock { waited = w } }
    func set(opened o: Bool) { lock.withLock { opened = o } }
    var state: (Bool, Bool) { lock.withLock { (waited, opened) } }
}
