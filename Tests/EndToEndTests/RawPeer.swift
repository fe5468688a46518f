#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing
import SpeakBridgeSupport

/// A hand-driven capture device: the package's own state machines over a `RawLink`, so a test can pair under any
/// name and send any message (including ones the real CLI never sends) to the real daemon.
struct RawPeer {
    let key: X25519PrivateKey
    var desktopKey: X25519PublicKey
    var psk: SymmetricKey

    /// Pairs with the daemon of `pair` under `name` through a code from `speakbridge pair`.
    static func paired(with pair: Pair, name: String) throws -> RawPeer {
        let code = try PairingCode.parse(try pair.pairCode())
        let desktopKey = try X25519PublicKey(rawRepresentation: code.publicKey)
        let key = X25519PrivateKey()
        let link = try RawLink(port: pair.port, path: ConnectionIntent.pair.path)
        defer { link.close() }
        var machine = try InitiatorMachine(intent: .pair, localStatic: key, desktopKey: desktopKey,
                                           psk: try #require(code.secretKey), firstMessage: .pair(name: name))
        link.send(try machine.start())
        for frame in Self.frames(machine.receive(try link.next())) { link.send(frame) }  // pair-confirm
        for case .paired(let result) in machine.receive(try link.next()) {
            return RawPeer(key: key, desktopKey: desktopKey, psk: result.sessionKey)
        }
        throw HarnessError("the raw pairing did not complete")
    }

    private init(key: X25519PrivateKey, desktopKey: X25519PublicKey, psk: SymmetricKey) {
        self.desktopKey = desktopKey
        self.psk = psk
        self.key = key
    }

    /// Opens a session (message 1, message 2) and sends `messages` as transport messages; returns the link.
    func session(port: Int, sending messages: [Message]) throws -> (RawLink, InitiatorMachine) {
        let link = try RawLink(port: port, path: ConnectionIntent.session.path)
        var machine = try InitiatorMachine(intent: .session, localStatic: key, desktopKey: desktopKey, psk: psk,
                                           firstMessage: .hello(agent: "raw-peer"))
        link.send(try machine.start())
        _ = machine.receive(try link.next())
        guard machine.isEstablished else { throw HarnessError("the raw session did not open") }
        for message in messages {
            for frame in Self.frames(machine.encryptAndSend(message)) { link.send(frame) }
        }
        return (link, machine)
    }

    static func frames(_ actions: [InitiatorMachine.Action]) -> [[UInt8]] {
        actions.compactMap { if case .send(let f) = $0 { return f } else { return nil } }
    }
}

/// What must never reach a terminal or a log raw: ESC, BEL, the 8-bit CSI/OSC/DCS (C1), bidi overrides.
enum TerminalBytes {
    /// Any scalar `PeerText` escapes, other than the newline that ends each line.
    static func rawControls(_ text: String) -> [Unicode.Scalar] {
        text.unicodeScalars.filter { $0 != "\n" && PeerText.needsEscape($0) }
    }

    /// A file's bytes as text, whatever they are (invalid UTF-8 becomes U+FFFD instead of an empty string).
    static func read(_ path: String) -> String {
        String(decoding: (FileManager.default.contents(atPath: path) ?? Data()), as: UTF8.self)
    }
}
