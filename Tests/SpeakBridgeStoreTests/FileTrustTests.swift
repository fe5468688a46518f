#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeControl
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
import SpeakBridgeTestSupport
@testable import SpeakBridgeStore
import SpeakBridgeSupport
import SpeakBridgeDelivery

/// Issue 8 rows 6 and 7: nothing on disk that another local user could have touched is trusted. "Another user" is
/// simulated by chown to 65534 (nobody), so those tests need root; the mode tests run as anyone.
@Suite("Files another user could touch", .serialized)
struct FileTrustTests {
    static let isRoot = geteuid() == 0
    static let nobody: uid_t = 65534

    let root = "/tmp/sb-trust-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    var home: Home { Home.resolve(override: root, environment: [:]) }

    func cleanup() { try? FileManager.default.removeItem(atPath: root) }

    /// A scratch directory outside the home (0700, ours).
    func outside() -> String {
        let path = root + "-outside"
        mkdir(path, 0o700)
        return path
    }

    func expectRefusal(_ needle: String, hint: String? = nil, _ body: () throws -> Void) {
        do {
            try body()
            Issue.record("accepted; expected a refusal mentioning \"\(needle)\"")
        } catch let error as StoreError {
            #expect(error.message.contains(needle), "message: \(error.message)")
            #expect(!error.noDaemon, "a refusal must not look like 'no daemon' (callers fall back on that)")
            if let hint { #expect(error.hint?.contains(hint) == true, "hint: \(error.hint ?? "none")") }
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    /// A valid peers.json pairing one client whose key and psk an attacker chose.
    func plantedPeersFile() -> [UInt8] {
        let key = Hex.encode(X25519PrivateKey().publicKey.rawRepresentation)
        let psk = Hex.encode(SecureRandom.bytes(32))
        return Array(#"{"version":1,"peers":[{"name":"evil","role":"client","publicKey":"\#(key)","psk":"\#(psk)","pairedAt":0}]}"#.utf8)
    }

    // MARK: directories

    @Test func homeInAWorldWritableDirectoryIsRefused() throws {
        defer { cleanup() }
        mkdir(root, 0o700)
        chmod(root, 0o777)
        expectRefusal("is writable by other users", hint: "chmod 700 \(root)") { _ = try Identity.loadOrCreate(home) }
        #expect(!FileManager.default.fileExists(atPath: home.identityFile))
    }

    @Test func aGroupWritableStateDirectoryIsRefused() throws {
        defer { cleanup() }
        try FileIO.makeDirectory(home.state)
        chmod(home.state, 0o770)
        expectRefusal("\(home.state) is writable by other users") { _ = try PeerStore(home: home) }
    }

    @Test(.enabled(if: isRoot)) func aRuntimeDirectoryOwnedByAnotherUserIsRefused() throws {
        defer { cleanup() }
        try FileIO.makeDirectory(home.runtime)
        chown(home.runtime, Self.nobody, Self.nobody)
        expectRefusal("owned by another user (uid 65534)") { try home.prepare() }
    }

    @Test func missingDirectoriesAreCreatedPrivate() throws {
        defer { cleanup() }
        let previous = umask(0)
        defer { umask(previous) }
        try home.prepare()
        for dir in [root, home.config, home.state, home.runtime, home.outboxDirectory] {
            #expect(FileIO.mode(dir) == 0o700, "\(dir)")
        }
    }

    @Test func theRuntimeFallbackIsNeverAPredictableTmpName() {
        let h = Home.resolve(override: nil, environment: ["HOME": "/home/u"])
        #expect(!h.runtime.hasPrefix("/tmp"))
        #expect(h.runtime == "/home/u/.local/state/speakbridge/run" || h.runtime == "/run/user/\(getuid())/speakbridge")
        let xdg = Home.resolve(override: nil, environment: ["HOME": "/home/u", "XDG_STATE_HOME": "/s"])
        #expect(xdg.runtime == "/s/speakbridge/run" || xdg.runtime == "/run/user/\(getuid())/speakbridge")
    }

    // MARK: temporary files and files read back

    @Test func aPlantedSymlinkAtTheOldTempNameCannotRedirectTheKey() throws {
        defer { cleanup() }
        let elsewhere = outside()
        defer { try? FileManager.default.removeItem(atPath: elsewhere) }
        let target = elsewhere + "/victim"
        try FileIO.atomicWrite(target, Array("original\n".utf8))
        try home.prepare()
        #expect(symlink(target, home.identityFile + ".tmp") == 0)
        let identity = try Identity.loadOrCreate(home)
        #expect(try FileIO.read(target) == Array("original\n".utf8))
        var info = stat()
        #expect(lstat(home.identityFile, &info) == 0 && info.st_mode & S_IFMT == S_IFREG)
        #expect(FileIO.mode(home.identityFile) == 0o600)
        #expect(try Identity.loadOrCreate(home).publicKey == identity.publicKey)
    }

    @Test func aSymlinkInPlaceOfPeersFileIsRefused() throws {
        defer { cleanup() }
        let elsewhere = outside()
        defer { try? FileManager.default.removeItem(atPath: elsewhere) }
        try FileIO.atomicWrite(elsewhere + "/peers.json", plantedPeersFile())
        try home.prepare()
        #expect(symlink(elsewhere + "/peers.json", home.peersFile) == 0)
        expectRefusal("is a symbolic link") { _ = try PeerStore(home: home) }
    }

    @Test func aPeersFileOthersCanReadOrWriteIsRefused() throws {
        defer { cleanup() }
        try home.prepare()
        try FileIO.atomicWrite(home.peersFile, plantedPeersFile())
        chmod(home.peersFile, 0o666)
        expectRefusal("is writable by other users (mode 666)", hint: "would not close a descriptor another user may already hold") { _ = try PeerStore(home: home) }
        chmod(home.peersFile, 0o640)
        expectRefusal("is readable by other users (mode 640)", hint: "pair again") { _ = try PeerStore(home: home) }
    }

    @Test(.enabled(if: isRoot)) func aPeersFilePlantedByAnotherUserIsRefused() throws {
        defer { cleanup() }
        try home.prepare()
        try FileIO.atomicWrite(home.peersFile, plantedPeersFile())
        chown(home.peersFile, Self.nobody, Self.nobody)
        expectRefusal("owned by another user (uid 65534)") { _ = try PeerStore(home: home) }
    }

    @Test func progressLogAndJournalOthersCanReadAreRefused() throws {
        defer { cleanup() }
        try home.prepare()
        try FileIO.atomicWrite(home.progressFile, [])
        chmod(home.progressFile, 0o644)
        expectRefusal("readable by other users") { _ = try ProgressLog(path: home.progressFile) }
        let device = DeviceID(publicKeyDigest: SHA256.hash(Array("desk".utf8)))
        let journal = home.outboxDirectory + "/" + device.compact + ".journal"
        try FileIO.atomicWrite(journal, [])
        chmod(journal, 0o604)
        expectRefusal("readable by other users") { _ = try Outbox(home: home, desktop: device) }
    }

    // MARK: control socket

    @Test func theServerRefusesAWorldWritableRuntimeDirectory() throws {
        defer { cleanup() }
        try FileIO.makeDirectory(home.runtime)
        chmod(home.runtime, 0o777)
        expectRefusal("writable by other users") {
            let server = try ControlServer(path: home.controlSocket) { _ in .null }
            server.stop()
        }
    }

    @Test func theServerDoesNotRemoveSomethingThatIsNotASocket() throws {
        defer { cleanup() }
        try home.prepare()
        try FileIO.atomicWrite(home.controlSocket, Array("keep me".utf8))
        expectRefusal("is not a socket") {
            let server = try ControlServer(path: home.controlSocket) { _ in .null }
            server.stop()
        }
        #expect(try FileIO.read(home.controlSocket) == Array("keep me".utf8))
    }

    @Test(.enabled(if: isRoot)) func theClientRefusesASocketOwnedByAnotherUser() throws {
        defer { cleanup() }
        try home.prepare()
        let impostor = try ImpostorSocket(path: home.controlSocket)
        defer { impostor.stop() }
        chown(home.controlSocket, Self.nobody, Self.nobody)
        expectRefusal("owned by another user (uid 65534)") {
            _ = try ControlClient.request(home: home, .object([("cmd", .string("pair"))]))
        }
        #expect(impostor.requests == 0)
    }

    @Test(.enabled(if: isRoot)) func theClientRefusesARuntimeDirectoryOfAnotherUser() throws {
        defer { cleanup() }
        try FileIO.makeDirectory(home.runtime)
        let impostor = try ImpostorSocket(path: home.controlSocket)
        defer { impostor.stop() }
        chown(home.controlSocket, Self.nobody, Self.nobody)
        chown(home.runtime, Self.nobody, Self.nobody)
        chmod(home.runtime, 0o777)
        expectRefusal("owned by another user (uid 65534)") {
            _ = try ControlClient.request(home: home, .object([("cmd", .string("revoke")), ("device", .string("x"))]))
        }
        #expect(impostor.requests == 0)
    }

    static let canImpersonate = isRoot && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/socat")

    /// The socket file is ours, but the process listening on it runs as nobody (it bound the socket elsewhere and
    /// the file was moved in): only SO_PEERCRED can tell, and the client must not talk to it.
    @Test(.enabled(if: canImpersonate)) func theClientRefusesAListenerRunningAsAnotherUser() throws {
        defer { cleanup() }
        try home.prepare()
        let staging = outside()
        defer { try? FileManager.default.removeItem(atPath: staging) }
        chmod(staging, 0o777)
        #expect(FileManager.default.createFile(atPath: staging + "/reply.json",
                                               contents: Data(#"{"ok":true,"code":"SB1:ATTACKERCODE"}"#.utf8 + [0x0A]),
                                               attributes: [.posixPermissions: 0o644]))
        let listener = Process()
        listener.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        listener.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/socat", "-U",
                              "UNIX-LISTEN:\(staging)/s,fork", "OPEN:\(staging)/reply.json,rdonly"]
        try listener.run()
        // SIGKILL: the test process may hand its blocked signal mask (SIGTERM included) to the child.
        defer { kill(listener.processIdentifier, SIGKILL); listener.waitUntilExit() }
        let deadline = Date().addingTimeInterval(5)
        // bind(2) makes the file before listen(2) runs: wait until a connection is accepted.
        while !ControlClient.isAlive(path: staging + "/s") && Date() < deadline { usleep(10_000) }
        #expect(chown(staging + "/s", geteuid(), getegid()) == 0)
        #expect(rename(staging + "/s", home.controlSocket) == 0)
        expectRefusal("runs as another user (uid 65534") {
            _ = try ControlClient.request(home: home, .object([("cmd", .string("pair"))]))
        }
    }

    @Test func anOverlongSocketPathIsAClearError() throws {
        let long = Home(config: "/c", state: "/s", runtime: "/" + String(repeating: "r", count: 120))
        expectRefusal("longer than the 107 a Unix socket allows", hint: "XDG_RUNTIME_DIR") {
            _ = try ControlClient.request(home: long, .object([("cmd", .string("status"))]))
        }
    }
}

/// A Unix socket that answers every request like a daemon would, handing out an attacker's pairing code.
final class ImpostorSocket: @unchecked Sendable {
    let fd: Int32
    let lock = NSLock()
    var count = 0
    var requests: Int { lock.withLock { count } }

    init(path: String) throws {
        fd = boundUnixSocket(at: path)
        guard fd >= 0, listen(fd, 4) == 0 else { throw StoreError("impostor cannot listen on \(path)") }
        chmod(path, 0o777)
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 { return }
                lock.withLock { count += 1 }
                let reply = Array(#"{"ok":true,"code":"SB1:ATTACKERCODE"}"#.utf8) + [0x0A]
                _ = reply.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(client)
            }
        }
    }

    func stop() { shutdown(fd, Int32(SHUT_RDWR)); close(fd) }
}
