#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import SpeakBridgeTestSupport

/// Issue 8 rows 5, 6, 7 against the real binary: another local user who can create files where SpeakBridge looks
/// must not be able to read the dictation, answer for the daemon, or redirect its keys. "Another user" is uid 65534
/// (nobody), simulated with chown, so most of these run only as root.
@Suite("Another local user", .serialized)
struct LocalUserAttackTests {
    static let isRoot = geteuid() == 0
    static let nobody: uid_t = 65534
    static let serveArgs = ["serve", "--listen", "127.0.0.1:0", "--no-mdns"]

    /// Starts `serve` and expects it to refuse: exit status != 0 within a few seconds, `needle` on stderr.
    /// A daemon that starts anyway is stopped and reported.
    func expectServeRefuses(home: String, sinks: [String] = ["stdout"], _ needle: String) throws {
        let p = try Proc(Self.serveArgs + sinks.flatMap { ["--sink", $0] }, home: home, label: "refused")
        do {
            let out = try p.wait(timeout: 10)
            #expect(out.status != 0)
            #expect(out.stderr.contains("speakbridge: error:"), "stderr: \(out.stderr)")
            #expect(out.stderr.contains(needle), "stderr: \(out.stderr)")
            #expect(out.stderr.contains("speakbridge: hint:"), "stderr: \(out.stderr)")
        } catch {
            p.terminate()
            Issue.record("serve started although it should have refused (\(needle)): \(p.stderr)")
        }
    }

    func scratch(_ label: String) -> String { Harness.tempDir(label) }

    func remove(_ paths: String...) { for p in paths { try? FileManager.default.removeItem(atPath: p) } }

    // MARK: row 6: runtime directory and control socket

    @Test(.enabled(if: isRoot)) func serveRefusesARuntimeDirectoryAnotherUserPreCreated() throws {
        let home = scratch("rt")
        defer { remove(home) }
        #expect(mkdir(home + "/run", 0o777) == 0)
        #expect(chmod(home + "/run", 0o777) == 0 && chown(home + "/run", Self.nobody, Self.nobody) == 0)
        try expectServeRefuses(home: home, "\(home)/run is a directory owned by another user (uid 65534)")
    }

    /// The old fallback without XDG_RUNTIME_DIR was /tmp/speakbridge-UID: another user could create it first.
    @Test(.enabled(if: isRoot)) func withoutXDGRuntimeDirTheDaemonNeverUsesTmp() throws {
        let predictable = "/tmp/speakbridge-\(getuid())"
        var planted = false
        if !FileManager.default.fileExists(atPath: predictable) {
            planted = mkdir(predictable, 0o777) == 0
            chmod(predictable, 0o777)
            chown(predictable, Self.nobody, Self.nobody)
        }
        defer { if planted { remove(predictable) } }
        let userHome = scratch("xdg")
        defer { remove(userHome) }
        var env = ProcessInfo.processInfo.environment
        for key in ["XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "SPEAKBRIDGE_HOME"] { env[key] = nil }
        env["HOME"] = userHome
        env["SPEAKBRIDGE_SECRETS"] = "file"
        let daemon = try BareProc(Self.serveArgs + ["--sink", "stdout"], env: env, log: userHome + "/serve.err")
        defer { daemon.stop() }
        try Harness.wait("the daemon's control socket") {
            !daemon.process.isRunning || BareProc.run(["status", "--json"], env: env).status == 0
        }
        #expect(daemon.process.isRunning, "serve exited: \(daemon.log)")
        #expect(!FileManager.default.fileExists(atPath: predictable + "/control.sock"),
                "the control socket is in a directory another user owns")
        let expected = FileManager.default.fileExists(atPath: "/run/user/\(getuid())")
            ? "/run/user/\(getuid())/speakbridge/control.sock" : userHome + "/.local/state/speakbridge/run/control.sock"
        var info = stat()
        #expect(lstat(expected, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK, "no socket at \(expected)")
    }

    @Test(.enabled(if: isRoot)) func pairAndRevokeRefuseASocketAnotherUserPlanted() throws {
        let home = scratch("imp")
        defer { remove(home) }
        #expect(mkdir(home + "/run", 0o700) == 0)
        let impostor = try FakeDaemon(path: home + "/run/control.sock")
        defer { impostor.stop() }
        chown(home + "/run/control.sock", Self.nobody, Self.nobody)
        let pair = try run(["pair", "--json"], home: home)
        #expect(pair.status != 0)
        #expect(!pair.stdout.contains("ATTACKER") && !pair.stderr.contains("ATTACKER"), "the impostor's code was shown")
        #expect(pair.stderr.contains("is a socket owned by another user (uid 65534)"), "stderr: \(pair.stderr)")
        // `devices revoke` does not hand the request to the impostor: without a daemon of ours it revokes in the
        // file itself, so the device is really gone (the old code printed "revoked" and changed nothing).
        try plantPeersFile(home, name: "pixel")
        let revoke = try run(["devices", "revoke", "pixel"], home: home)
        let peers = try String(contentsOfFile: home + "/state/peers.json", encoding: .utf8)
        #expect(!peers.contains("pixel"), "revoke was eaten by the impostor: \(revoke.stderr)")
        // ... and says loudly why it did not ask the daemon.
        #expect(revoke.stderr.contains("not asking the daemon") && revoke.stderr.contains("owned by another user"),
                "stderr: \(revoke.stderr)")
        #expect(impostor.requests == 0)
    }

    @Test(.enabled(if: isRoot)) func pairRefusesARuntimeDirectoryAnotherUserOwns() throws {
        let home = scratch("imp2")
        defer { remove(home) }
        #expect(mkdir(home + "/run", 0o777) == 0)
        let impostor = try FakeDaemon(path: home + "/run/control.sock")
        defer { impostor.stop() }
        chown(home + "/run/control.sock", Self.nobody, Self.nobody)
        chmod(home + "/run", 0o777)
        chown(home + "/run", Self.nobody, Self.nobody)
        let pair = try run(["pair", "--json"], home: home)
        #expect(pair.status != 0)
        #expect(!pair.stdout.contains("ATTACKER"), "the impostor's code was shown")
        #expect(pair.stderr.contains("owned by another user"), "stderr: \(pair.stderr)")
        #expect(impostor.requests == 0)
    }

    // MARK: row 7: directories, temp files, files read back

    @Test func serveRefusesAWorldWritableHomeAndTheKeyNeverLeavesIt() throws {
        let home = scratch("ww")
        let outside = scratch("victim")
        defer { remove(home, outside) }
        let victim = outside + "/victim"
        #expect(FileManager.default.createFile(atPath: victim, contents: Data("original\n".utf8)))
        #expect(mkdir(home + "/config", 0o700) == 0)
        #expect(symlink(victim, home + "/config/identity.key.tmp") == 0)
        chmod(home, 0o777)
        try expectServeRefuses(home: home, "\(home) is writable by other users (mode 777)")
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "original\n")
        #expect(!FileManager.default.fileExists(atPath: home + "/config/identity.key"))
    }

    @Test func aSymlinkPlantedAtTheOldTempNameCannotRedirectTheKey() throws {
        let pair = Pair()
        defer { pair.stop() }
        let outside = scratch("victim")
        defer { remove(outside) }
        let victim = outside + "/victim"
        #expect(FileManager.default.createFile(atPath: victim, contents: Data("original\n".utf8)))
        #expect(mkdir(pair.desktopHome + "/config", 0o700) == 0)
        #expect(symlink(victim, pair.desktopHome + "/config/identity.key.tmp") == 0)
        try pair.startDaemon(sinks: ["stdout"])
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "original\n", "the key was written outside the home")
        var info = stat()
        let key = pair.desktopHome + "/config/identity.key"
        #expect(lstat(key, &info) == 0 && info.st_mode & S_IFMT == S_IFREG && info.st_mode & 0o777 == 0o600)
    }

    @Test(.enabled(if: isRoot)) func serveRefusesAPeersFileAnotherUserPlanted() throws {
        let home = scratch("peers")
        defer { remove(home) }
        try plantPeersFile(home)
        chown(home + "/state/peers.json", Self.nobody, Self.nobody)
        try expectServeRefuses(home: home, "peers.json is a file owned by another user (uid 65534)")
    }

    @Test func serveRefusesAPeersFileOthersCanWrite() throws {
        let home = scratch("peers2")
        defer { remove(home) }
        try plantPeersFile(home)
        chmod(home + "/state/peers.json", 0o666)
        try expectServeRefuses(home: home, "peers.json is writable by other users (mode 666)")
    }

    @Test(.enabled(if: isRoot)) func aSecretsFileAnotherUserPlantedIsRefused() throws {
        let home = scratch("sec")
        defer { remove(home) }
        #expect(mkdir(home + "/config", 0o700) == 0)
        let path = home + "/config/secrets.json"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(#"{"version":1,"secrets":{"r":"theirs"}}"#.utf8),
                                               attributes: [.posixPermissions: 0o600]))
        chown(path, Self.nobody, Self.nobody)
        let out = try run(["config", "set", "openai.apiKey", "sk-mine"], home: home)
        #expect(out.status != 0)
        #expect(out.stderr.contains("secrets.json is a file owned by another user (uid 65534)"), "stderr: \(out.stderr)")
    }

    @Test func aSymlinkInPlaceOfTheSecretsFileIsRefused() throws {
        let home = scratch("sec2")
        let outside = scratch("elsewhere")
        defer { remove(home, outside) }
        #expect(mkdir(home + "/config", 0o700) == 0)
        let target = outside + "/secrets.json"
        #expect(FileManager.default.createFile(atPath: target, contents: Data(#"{"version":1,"secrets":{}}"#.utf8),
                                               attributes: [.posixPermissions: 0o600]))
        #expect(symlink(target, home + "/config/secrets.json") == 0)
        let out = try run(["config", "set", "openai.apiKey", "sk-mine"], home: home)
        #expect(out.status != 0)
        #expect(out.stderr.contains("is a symbolic link"), "stderr: \(out.stderr)")
    }

    /// A peers.json pairing a "device" whose key and psk a stranger chose: with it, they could send text without
    /// ever seeing a pairing code.
    func plantPeersFile(_ home: String, name: String = "evil") throws {
        mkdir(home + "/state", 0o700)
        let key = String(repeating: "09", count: 32), psk = String(repeating: "5a", count: 32)
        let text = #"{"version":1,"peers":[{"name":"\#(name)","role":"client","publicKey":"\#(key)","psk":"\#(psk)","pairedAt":0}]}"#
        let fd = open(home + "/state/peers.json", O_WRONLY | O_CREAT | O_EXCL, 0o600)
        #expect(fd >= 0)
        _ = text.utf8CString.withUnsafeBytes { write(fd, $0.baseAddress, $0.count - 1) }
        close(fd)
    }

    // MARK: row 5: the FIFO sink

    @Test(.enabled(if: isRoot)) func serveRefusesAFIFOAnotherUserCreated() throws {
        let home = scratch("fifo")
        defer { remove(home) }
        let fifo = home + "/dictation"
        #expect(mkfifo(fifo, 0o600) == 0 && chmod(fifo, 0o666) == 0 && chown(fifo, Self.nobody, Self.nobody) == 0)
        try expectServeRefuses(home: home, sinks: ["fifo:" + fifo], "FIFO \(fifo) is owned by another user (uid 65534)")
    }

    @Test(.enabled(if: isRoot)) func serveRefusesASymlinkToAnotherUsersFIFO() throws {
        let home = scratch("fifo2")
        let theirs = scratch("theirs")
        defer { remove(home, theirs) }
        let target = theirs + "/listen"
        #expect(mkfifo(target, 0o600) == 0 && chmod(target, 0o666) == 0 && chown(target, Self.nobody, Self.nobody) == 0)
        chmod(theirs, 0o755)
        let fifo = home + "/dictation"
        #expect(symlink(target, fifo) == 0)
        try expectServeRefuses(home: home, sinks: ["fifo:" + fifo], "is a symbolic link")
    }

    @Test func serveWillNotCreateAFIFOInAWorldWritableDirectory() throws {
        let home = scratch("fifo3")
        let shared = scratch("shared")
        defer { remove(home, shared) }
        chmod(shared, 0o1777)
        try expectServeRefuses(home: home, sinks: ["fifo:" + shared + "/dictation"], "writable by other users")
        #expect(!FileManager.default.fileExists(atPath: shared + "/dictation"))
    }
}

/// A `speakbridge` process run with exactly the given environment and no `--home` (the default XDG layout).
final class BareProc: @unchecked Sendable {
    let process = Process()
    let logPath: String

    init(_ args: [String], env: [String: String], log: String) throws {
        logPath = log
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.executableURL = URL(fileURLWithPath: Harness.binary)
        process.arguments = args
        process.environment = env
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle(forWritingAtPath: log)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    static func run(_ args: [String], env: [String: String]) -> (status: Int32, stderr: String) {
        let log = "/tmp/sbt-bare-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).err"
        defer { try? FileManager.default.removeItem(atPath: log) }
        guard let p = try? BareProc(args, env: env, log: log) else { return (-1, "") }
        p.process.waitUntilExit()
        return (p.process.terminationStatus, p.log)
    }
}

/// A Unix socket in the daemon's place that answers every request as a daemon would, with an attacker's code.
final class FakeDaemon: @unchecked Sendable {
    let fd: Int32
    let lock = NSLock()
    var count = 0
    var requests: Int { lock.withLock { count } }

    init(path: String) throws {
        fd = boundUnixSocket(at: path)
        guard fd >= 0, listen(fd, 4) == 0 else { throw HarnessError("fake daemon cannot listen on \(path)") }
        chmod(path, 0o777)
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 { return }
                lock.withLock { count += 1 }
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = recv(client, &buffer, buffer.count, 0)
                let reply = Array(#"{"ok":true,"code":"SB1:ATTACKERCODE","expires":9999999999,"id":"X"}"#.utf8) + [0x0A]
                _ = reply.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(client)
            }
        }
    }

    func stop() { shutdown(fd, Int32(SHUT_RDWR)); close(fd) }
}
