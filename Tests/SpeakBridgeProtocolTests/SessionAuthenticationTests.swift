import SpeakBridgeCrypto
import Testing
@testable import SpeakBridgeProtocol

/// Issue 8 row 11: the responder counts a session as authenticated only when the initiator's first transport
/// message decrypts. Message 1 can be replayed by anyone who recorded it; a transport message cannot be made
/// without the ephemeral key of the handshake.
@Suite("Session authentication on the first transport message")
struct SessionAuthenticationTests {
    let desktop = X25519PrivateKey()
    let phone = X25519PrivateKey()
    let psk = SymmetricKey.random()

    func responder() -> ResponderMachine {
        ResponderMachine(intent: .session, context: ResponderContext(
            localStatic: desktop, localName: "desk", pairingSecret: { nil },
            sessionPSK: { [phone, psk] in $0 == phone.publicKey ? psk : nil }, delivered: { _, _ in 3 }))
    }

    func initiator() throws -> InitiatorMachine {
        try InitiatorMachine(intent: .session, localStatic: phone, desktopKey: desktop.publicKey, psk: psk,
                             firstMessage: .hello(agent: "test"))
    }

    static func isAuthenticated(_ a: ResponderMachine.Action) -> Bool {
        if case .authenticated = a { return true } else { return false }
    }

    static func sent(_ actions: [ResponderMachine.Action]) -> [[UInt8]] {
        actions.compactMap { if case .send(let f) = $0 { return f } else { return nil } }
    }

    @Test("a replayed message 1 gets message 2 and nothing else: no authentication, no acks, closed on garbage")
    func replayedMessage1() throws {
        var genuine = try initiator()
        let message1 = try genuine.start()
        var first = responder()
        _ = first.receive(message1)

        var replayed = responder()
        let actions = replayed.receive(message1)
        #expect(Self.sent(actions).count == 1)
        #expect(actions.count == 1, "only message 2: \(actions)")
        #expect(!replayed.isEstablished && replayed.peer == nil)
        // Nothing is encrypted for it before it proves itself: no ack, no error, no resume answer.
        #expect(replayed.acknowledge(session: "s", through: 1).isEmpty)
        #expect(replayed.encryptAndSend(.bye).isEmpty)
        // The replayer cannot produce a transport message: whatever it sends closes the connection.
        let garbage = replayed.receive([UInt8](repeating: 0x42, count: 40))
        #expect(!garbage.contains(where: Self.isAuthenticated))
        #expect(garbage.contains { if case .close = $0 { return true } else { return false } })
        #expect(replayed.receive(message1).isEmpty)
    }

    @Test("the first transport message authenticates, before what it asks for is handled")
    func firstTransportMessageAuthenticates() throws {
        var r = responder()
        var i = try initiator()
        let a1 = r.receive(try i.start())
        #expect(!a1.contains(where: Self.isAuthenticated))
        _ = i.receive(try #require(Self.sent(a1).first))
        #expect(i.isEstablished)
        let frame = try #require(i.encryptAndSend(.resume(session: "s", delivered: nil)).compactMap {
            if case .send(let f) = $0 { return f } else { return nil }
        }.first)
        let a2 = r.receive(frame)
        guard case .authenticated(let device, let key)? = a2.first else { Issue.record("not authenticated first: \(a2)"); return }
        #expect(device == KeySchedule.deviceID(of: phone.publicKey) && key == phone.publicKey)
        #expect(Self.sent(a2).count == 1)  // the resume answer
        #expect(r.isEstablished && r.peer == device)
        guard case .received(.resume("s", 3))? = i.receive(Self.sent(a2)[0]).first else { Issue.record("no resume answer"); return }
        // Later messages do not authenticate again.
        let a3 = r.receive(try #require(i.encryptAndSend(.chunk(session: "s", Chunk(seq: 4, text: "x"))).compactMap {
            if case .send(let f) = $0 { return f } else { return nil }
        }.first))
        #expect(!a3.contains(where: Self.isAuthenticated))
        #expect(a3.contains { if case .deliver = $0 { return true } else { return false } })
    }

    @Test("a device revoked (or paired again) between message 1 and its first transport message is refused")
    func revokedDuringHandshake() throws {
        final class Paired: @unchecked Sendable {  // test-only box; the test runs on one thread
            var psk: SymmetricKey?
            init(_ psk: SymmetricKey) { self.psk = psk }
        }
        for replacement in [nil, SymmetricKey.random()] {
            let paired = Paired(psk)
            var r = ResponderMachine(intent: .session, context: ResponderContext(
                localStatic: desktop, localName: "desk", pairingSecret: { nil },
                sessionPSK: { [phone] in $0 == phone.publicKey ? paired.psk : nil }, delivered: { _, _ in 0 }))
            var i = try initiator()
            _ = i.receive(try #require(Self.sent(r.receive(try i.start())).first))
            paired.psk = replacement  // `devices revoke` (nil), or revoke and pair again (a new psk)
            guard case .send(let frame)? = i.encryptAndSend(.resume(session: "s", delivered: nil)).first else {
                Issue.record("no frame")
                return
            }
            let actions = r.receive(frame)
            #expect(!actions.contains(where: Self.isAuthenticated))
            #expect(actions.contains { if case .close = $0 { return true } else { return false } })
            #expect(!r.isEstablished)
        }
    }

    @Test("an undecryptable first transport message closes without authenticating")
    func tamperedFirstTransportMessage() throws {
        var r = responder()
        var i = try initiator()
        _ = i.receive(try #require(Self.sent(r.receive(try i.start())).first))
        guard case .send(var frame)? = i.encryptAndSend(.resume(session: "s", delivered: nil)).first else {
            Issue.record("no frame")
            return
        }
        frame[frame.count - 1] ^= 0x80
        let actions = r.receive(frame)
        #expect(!actions.contains(where: Self.isAuthenticated))
        #expect(actions.contains { if case .close = $0 { return true } else { return false } })
        #expect(!r.isEstablished)
    }
}
