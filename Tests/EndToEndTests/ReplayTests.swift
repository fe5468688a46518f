#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// Issue 8 row 11: a session counts as authenticated when the initiator's first transport message decrypts.
/// A replayed message 1 (anyone on the LAN can record one) changes nothing: no file write, no lifted cap or
/// deadline, no acks.
@Suite("End to end: a replayed session message 1", .serialized)
struct ReplayTests {
    /// The phone's real session message 1, made from its identity and psk (what a LAN observer records).
    func recordedMessage1(_ pair: Pair) throws -> [UInt8] {
        let home = Home.resolve(override: pair.phoneHome)
        let identity = try Identity.loadOrCreate(home)
        let desktop = try #require(try PeerStore(home: home).all.first)
        var machine = try InitiatorMachine(intent: .session, localStatic: identity.privateKey,
                                           desktopKey: desktop.publicKey, psk: desktop.psk,
                                           firstMessage: .hello(agent: "speakbridge-cli/0.1"))
        return try machine.start()
    }

    func authenticatedCount(_ pair: Pair) throws -> Int64? {
        let status = try run(["status", "--json"], home: pair.desktopHome).stdout
        return try JSONValue.parse(Array(status.utf8), maxDepth: 8, maxBytes: 1 << 20)["authenticated"]?.int64Value
    }

    @Test("replaying message 1: no peers.json write, still unauthenticated (closed at the deadline), no acks")
    func replayedMessage1ChangesNothing() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        #expect(try pair.send(["first"]).status == 0)
        let message1 = try recordedMessage1(pair)

        let peersPath = pair.desktopHome + "/state/peers.json"
        let before = try FileManager.default.attributesOfItem(atPath: peersPath)[.modificationDate] as? Date
        let contentBefore = FileManager.default.contents(atPath: peersPath)
        usleep(20_000)  // a write now would show in the modification time

        let opened = Date()
        let replay = try RawLink(port: pair.port, path: ConnectionIntent.session.path)
        defer { replay.close() }
        replay.send(message1)
        _ = try replay.next()  // message 2: the daemon cannot tell a replay from message 1 alone
        usleep(300_000)
        #expect(FileManager.default.contents(atPath: peersPath) == contentBefore, "peers.json was rewritten")
        #expect(try FileManager.default.attributesOfItem(atPath: peersPath)[.modificationDate] as? Date == before)
        #expect(try authenticatedCount(pair) == 0, "the replay counts as an authenticated connection")

        // A genuine session of the same device delivers meanwhile: its acks must not reach the replay.
        #expect(try pair.send(["second"]).status == 0)
        #expect(throws: HarnessError.self, "the replay received a frame after message 2") { _ = try replay.next(timeout: 0.5) }

        // Still unauthenticated: the handshake deadline closes it.
        try replay.waitClosed(timeout: Double(SpeakBridgeProtocol.handshakeTimeout) + 5)
        #expect(Date().timeIntervalSince(opened) >= Double(SpeakBridgeProtocol.handshakeTimeout) - 1)
        #expect(pair.daemon!.stdout == "first\nsecond\n")
    }

    @Test("a genuine session is authenticated by its first transport message and works as before")
    func genuineSessionAuthenticatesOnFirstTransportMessage() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        let home = Home.resolve(override: pair.phoneHome)
        let identity = try Identity.loadOrCreate(home)
        let desktop = try #require(try PeerStore(home: home).all.first)
        let link = try RawLink(port: pair.port, path: ConnectionIntent.session.path)
        defer { link.close() }
        var machine = try InitiatorMachine(intent: .session, localStatic: identity.privateKey,
                                           desktopKey: desktop.publicKey, psk: desktop.psk,
                                           firstMessage: .hello(agent: "raw"))
        link.send(try machine.start())
        _ = machine.receive(try link.next())
        #expect(machine.isEstablished)
        usleep(200_000)
        #expect(try authenticatedCount(pair) == 0, "authenticated before any transport message")
        for frame in RawPeer.frames(machine.encryptAndSend(.resume(session: "raw", delivered: nil))) { link.send(frame) }
        guard case .received(.resume("raw", 0))? = machine.receive(try link.next()).first else {
            Issue.record("no resume answer")
            return
        }
        #expect(try authenticatedCount(pair) == 1)
        for frame in RawPeer.frames(machine.encryptAndSend(.chunk(session: "raw", Chunk(seq: 1, text: "hi")))) { link.send(frame) }
        guard case .received(.ack("raw", 1))? = machine.receive(try link.next()).first else {
            Issue.record("no ack")
            return
        }
        #expect(pair.daemon!.stdout == "hi\n")
    }
}

/// Issue 8 row 9: the pairing code (with its 256-bit secret) is shown on a terminal only.
@Suite("End to end: the pairing code stays out of logs", .serialized)
struct PairingCodeDisplayTests {
    @Test("serve with stderr to a file prints how to pair, never the code")
    func noCodeInALog() throws {
        let home = Harness.tempDir("nocode")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let daemon = try Proc(["serve", "--listen", "127.0.0.1:0", "--no-mdns"], home: home, label: "serve")
        defer { daemon.terminate() }
        try Harness.wait("the pairing hint (or a code)") {
            let log = TerminalBytes.read(daemon.stderrPath)
            return log.contains("speakbridge pair") || log.contains("single use")
        }
        usleep(300_000)
        let log = TerminalBytes.read(daemon.stderrPath)
        #expect(!log.contains("SB1:"), "the pairing code reached a log: \(log)")
        #expect(log.contains("speakbridge: hint: to pair a device, run `speakbridge pair --home '\(home)'`"))
        #expect(!log.contains("█") && !log.contains("▀"), "a QR reached the log")
        // `pair` still works and is the way to get the code.
        let pair = try run(["pair", "--json"], home: home)
        #expect(pair.status == 0 && pair.stdout.contains("SB1:"))
    }

    @Test("serve on a terminal shows the code once", .enabled(if: PseudoTerminal.isAvailable))
    func codeOnATerminal() throws {
        let home = Harness.tempDir("ttycode")
        defer { try? FileManager.default.removeItem(atPath: home) }
        // script(1) runs serve on a pseudo-terminal and copies what it writes to `typescript`.
        let typescript = home + "/typescript"
        let command = "'\(Harness.binary)' serve --listen 127.0.0.1:0 --no-mdns --home '\(home)'"
        let (script, _) = try PseudoTerminal.start(command, typescript: typescript)  // the daemon ignores stdin
        defer {
            // Stop the daemon (script's child) through its control socket's pid, then script itself.
            if let status = try? run(["status", "--json"], home: home).stdout,
               let pid = (try? JSONValue.parse(Array(status.utf8), maxDepth: 8, maxBytes: 1 << 20))?["pid"]?.int64Value {
                kill(pid_t(pid), SIGTERM)
            }
            let deadline = Date().addingTimeInterval(5)
            while script.isRunning && Date() < deadline { usleep(20_000) }
            if script.isRunning { kill(script.processIdentifier, SIGKILL) }
        }
        try Harness.wait("the code on the terminal") { TerminalBytes.read(typescript).contains("single use") }
        let shown = TerminalBytes.read(typescript)
        #expect(shown.components(separatedBy: "SB1:").count - 1 == 1, "the code is shown exactly once: \(shown)")
    }
}
