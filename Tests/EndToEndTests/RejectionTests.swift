#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeWebSocket
import Testing
import SpeakBridgeTestSupport
import SpeakBridgeSupport

/// What must be refused, against the real daemon: nothing of it may reach a sink.
@Suite("End to end: rejections", .serialized)
struct RejectionTests {
    /// A home that has the phone's peers.json (so it knows the desktop and the psk) but its own identity key.
    func impostorHome(copying pair: Pair, keepIdentity: Bool) throws -> String {
        let home = Harness.tempDir("impostor")
        try FileManager.default.createDirectory(atPath: home + "/state", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: home + "/config", withIntermediateDirectories: true)
        if keepIdentity {
            // Stolen identity key, but psk replaced: the per-pair psk is required too.
            try FileManager.default.copyItem(atPath: pair.phoneHome + "/config/identity.key", toPath: home + "/config/identity.key")
            var peers = try String(contentsOfFile: pair.phoneHome + "/state/peers.json", encoding: .utf8)
            let psk = try #require(peers.range(of: #""psk":"[0-9a-f]{64}""#, options: .regularExpression))
            peers.replaceSubrange(psk, with: "\"psk\":\"" + Hex.encode(SecureRandom.bytes(32)) + "\"")
            try peers.write(toFile: home + "/state/peers.json", atomically: true, encoding: .utf8)
            chmod(home + "/state/peers.json", 0o600)  // speakbridge refuses a psk file others can read
        } else {
            try FileManager.default.copyItem(atPath: pair.phoneHome + "/state/peers.json", toPath: home + "/state/peers.json")
        }
        return home
    }

    /// Refusals a stranger repeats are logged at most 5 times in 10 s; a flood that then stops is counted in the
    /// log when its window ends — the daemon wakes for it (the core's deadline), no later refusal is needed.
    @Test("a stopped flood of refused pairing attempts is counted in the log when its window ends")
    func aStoppedFloodIsCountedInTheLog() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        for _ in 0..<12 {
            let link = try RawLink(port: pair.port, path: ConnectionIntent.pair.path)
            try link.waitClosed(timeout: 10)
            link.close()
        }
        let daemon = try #require(pair.daemon)
        try Harness.wait("the count of the hidden refusals", timeout: 30) {
            daemon.stderr.contains("7 more refused pairing attempts in the 10 s before, not shown")
        }
        let shown = daemon.stderr.split(separator: "\n").filter { $0.contains("pairing attempt from") }
        #expect(shown.count == 5, "\(shown)")
    }

    @Test("an unpaired key, a stolen psk alone, a stolen key alone, a revoked device: refused, nothing written")
    func refusedDevices() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        #expect(try pair.send(["allowed"]).status == 0)

        for keepIdentity in [false, true] {
            let home = try impostorHome(copying: pair, keepIdentity: keepIdentity)
            defer { try? FileManager.default.removeItem(atPath: home) }
            let out = try run(["send", "--text", "intruder", "--timeout", "3"], home: home)
            #expect(out.status == 77, "impostor (keepIdentity: \(keepIdentity)) must be refused: \(out.stderr)")
        }

        let devices = try run(["devices", "--json"], home: pair.desktopHome).stdout
        let id = try #require(devices.range(of: #"[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}"#, options: .regularExpression))
        let revoke = try run(["devices", "revoke", String(devices[id])], home: pair.desktopHome)
        #expect(revoke.status == 0, "\(revoke.stderr)")
        let after = try run(["send", "--text", "after revoke", "--timeout", "3"], home: pair.phoneHome)
        #expect(after.status == 77)

        usleep(300_000)
        let out = pair.daemon!.stdout
        #expect(out == "allowed\n")
        #expect(pair.daemon!.stderr.contains("unknown or revoked device"))
    }

    @Test("an expired code is refused by the client, and by the daemon when a client ignores the expiry")
    func expiredCode() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"], extra: ["--pairing-lifetime", "1"])
        let code = try pair.pairCode()
        usleep(2_200_000)
        let out = try run(["join", code, "--name", "late"], home: pair.phoneHome)
        #expect(out.status != 0)
        #expect(out.stderr.contains("expired"))
        #expect(out.stderr.contains("hint:"))
        // A client that ignores the expiry: the daemon no longer accepts the secret.
        let parsed = try PairingCode.parse(code)
        #expect(try rawPairingAttempt(port: pair.port, code: parsed) == false)
        #expect(try run(["devices", "--json"], home: pair.desktopHome).stdout == "[]\n")
    }

    @Test("a code is single use: a second join with it fails")
    func reusedCode() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        let code = try pair.pairCode()
        #expect(try run(["join", code, "--name", "first"], home: pair.phoneHome).status == 0)
        let other = Harness.tempDir("second")
        defer { try? FileManager.default.removeItem(atPath: other) }
        let second = try run(["join", code, "--name", "second"], home: other)
        #expect(second.status != 0)
        #expect(second.stderr.contains("did not accept this code"), "\(second.stderr)")
        let devices = try run(["devices", "--json"], home: pair.desktopHome).stdout
        #expect(devices.contains("first") && !devices.contains("second"))
    }

    @Test("a wrong secret kills the code after three attempts")
    func guessedCode() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        var code = try PairingCode.parse(try pair.pairCode())
        let good = code
        code.secret = SecureRandom.bytes(32)
        for _ in 0..<3 { #expect(try rawPairingAttempt(port: pair.port, code: code) == false) }
        // Even the right secret is dead now.
        #expect(try rawPairingAttempt(port: pair.port, code: good) == false)
    }

    @Test("a flipped ciphertext bit closes the session and writes nothing; the next session works")
    func flippedBit() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        let identity = try Identity.loadOrCreate(Home.resolve(override: pair.phoneHome))
        let desktop = try #require(try PeerStore(home: Home.resolve(override: pair.phoneHome)).all.first)
        let link = try RawLink(port: pair.port, path: ConnectionIntent.session.path)
        defer { link.close() }
        var machine = try InitiatorMachine(intent: .session, localStatic: identity.privateKey,
                                           desktopKey: desktop.publicKey, psk: desktop.psk.copyBytes(),
                                           firstMessage: .hello(agent: "tamper-test"))
        link.send(try machine.start())
        let reply = try link.next()
        #expect(machine.receive(reply).contains { if case .established = $0 { return true } else { return false } })
        guard case .send(var frame)? = machine.encryptAndSend(.chunk(session: "t", Chunk(seq: 1, text: "tampered"))).first
        else { Issue.record("no frame"); return }
        frame[frame.count - 20] ^= 0x04
        link.send(frame)
        try link.waitClosed()
        #expect(try pair.send(["genuine"]).status == 0)
        usleep(200_000)
        #expect(pair.daemon!.stdout == "genuine\n")
    }

    /// Tries to pair with `code` over a raw connection; true if the daemon answered message 1.
    func rawPairingAttempt(port: Int, code: PairingCode) throws -> Bool {
        let link = try RawLink(port: port, path: ConnectionIntent.pair.path)
        defer { link.close() }
        guard link.isOpen else { return false }
        var machine = try InitiatorMachine(intent: .pair, localStatic: X25519PrivateKey(),
                                           desktopKey: try X25519PublicKey(rawRepresentation: code.publicKey),
                                           psk: code.secret, firstMessage: .pair(name: "raw"))
        link.send(try machine.start())
        return (try? link.next(timeout: 2)) != nil
    }
}

/// One WebSocket connection driven synchronously by a test.
final class RawLink: @unchecked Sendable {
    let lock = NSCondition()
    var inbox: [[UInt8]] = []
    var closed = false
    var opened = false
    var client: WebSocketClient!
    var id: WebSocketConnectionID!

    init(port: Int, path: String) throws {
        client = try WebSocketClient { [weak self] event in
            guard let self else { return }
            self.lock.withLock {
                switch event {
                case .opened: self.opened = true
                case .message(_, let bytes): self.inbox.append(bytes)
                case .closed: self.closed = true
                }
                self.lock.broadcast()
            }
        }
        // Bounds of 30 s here only catch a hang (a loaded CI machine can starve a thread for seconds).
        id = client.connect(host: "127.0.0.1", port: port, path: path, subprotocol: SpeakBridgeProtocol.subprotocol,
                            timeout: 30)
        lock.withLock {
            let deadline = Date().addingTimeInterval(30)
            while !opened && !closed && lock.wait(until: deadline) {}
        }
    }

    var isOpen: Bool { lock.withLock { opened && !closed } }

    func send(_ bytes: [UInt8]) { client.send(bytes, on: id) }

    func next(timeout: Double = 30) throws -> [UInt8] {
        try lock.withLock {
            let deadline = Date().addingTimeInterval(timeout)
            while inbox.isEmpty && !closed && lock.wait(until: deadline) {}
            guard !inbox.isEmpty else { throw HarnessError(closed ? "closed" : "no frame") }
            return inbox.removeFirst()
        }
    }

    func waitClosed(timeout: Double = 30) throws {
        try lock.withLock {
            let deadline = Date().addingTimeInterval(timeout)
            while !closed && lock.wait(until: deadline) {}
            if !closed { throw HarnessError("connection stayed open") }
        }
    }

    func close() { client.shutdown() }
}

@Suite("End to end: one daemon per home", .serialized)
struct SingleDaemonTests {
    @Test("a second serve on the same home refuses to start, with a hint; the first keeps working")
    func secondDaemonRefused() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        let second = try Proc(["serve", "--listen", "127.0.0.1:0", "--no-mdns"], home: pair.desktopHome, label: "second")
        let out = try second.wait(timeout: 20)
        #expect(out.status != 0)
        #expect(out.stderr.contains("already running"))
        #expect(out.stderr.contains("speakbridge: hint:"))
        try pair.join()
        #expect(try pair.send(["still here"]).status == 0)
    }
}

@Suite("End to end: systemd notification")
struct SystemdNotifyTests {
    @Test("serve sends READY=1 to $NOTIFY_SOCKET once it listens")
    func readyIsSent() throws {
        let home = Harness.tempDir("notify")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let path = home + "/notify.sock"
        let fd = boundUnixSocket(at: path, type: Int32(SOCK_DGRAM.rawValue))
        #expect(fd >= 0)
        defer { close(fd) }
        var tv = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let daemon = try Proc(["serve", "--listen", "127.0.0.1:0", "--no-mdns"], home: home,
                              env: ["NOTIFY_SOCKET": path], label: "serve")
        defer { daemon.terminate() }
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = recv(fd, &buffer, buffer.count, 0)
        #expect(n > 0)
        let text = String(decoding: buffer[0..<max(0, n)], as: UTF8.self)
        #expect(text.hasPrefix("READY=1\n"))
        #expect(text.contains("listening on 127.0.0.1:"))
    }
}

@Suite("End to end: graceful stop", .serialized)
struct GracefulStopTests {
    @Test("SIGTERM and SIGINT stop the daemon cleanly: exit 0, control socket gone", arguments: [SIGTERM, SIGINT])
    func stopsOnSignal(_ sig: Int32) throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        let daemon = try #require(pair.daemon)
        kill(daemon.pid, sig)
        let out = try daemon.wait(timeout: 10)
        #expect(out.status == 0)
        #expect(out.stderr.contains("speakbridge: stopping"))
        #expect(!FileManager.default.fileExists(atPath: pair.desktopHome + "/run/control.sock"))
    }
}
