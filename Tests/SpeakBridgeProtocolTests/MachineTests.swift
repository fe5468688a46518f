import SpeakBridgeCrypto
import Testing
@testable import SpeakBridgeProtocol

/// Both sides of the protocol in memory: frames are handed across by the test.
@Suite("Pairing and session state machines")
struct MachineTests {
    let desktop = X25519PrivateKey()
    let phone = X25519PrivateKey()
    let secret = SecureRandom.bytes(32)

    func responder(_ intent: ConnectionIntent, secret: [UInt8]?, psks: [X25519PublicKey: [UInt8]] = [:],
                   delivered: UInt64 = 0) -> ResponderMachine {
        ResponderMachine(intent: intent, context: ResponderContext(
            localStatic: desktop, localName: "desk", pairingSecret: { secret.flatMap { try? SymmetricKey(bytes: $0) } },
            sessionPSK: { psks[$0].flatMap { try? SymmetricKey(bytes: $0) } }, delivered: { _, _ in delivered }))
    }

    static func sent(_ actions: [ResponderMachine.Action]) -> [[UInt8]] {
        actions.compactMap { if case .send(let f) = $0 { return f } else { return nil } }
    }

    static func sent(_ actions: [InitiatorMachine.Action]) -> [[UInt8]] {
        actions.compactMap { if case .send(let f) = $0 { return f } else { return nil } }
    }

    /// Pairs and returns (desktop outcome psk, phone result psk).
    func pair() throws -> ([UInt8], [UInt8]) {
        var r = responder(.pair, secret: secret)
        var i = try InitiatorMachine(intent: .pair, localStatic: phone, desktopKey: desktop.publicKey, psk: secret,
                                     firstMessage: .pair(name: "pixel"))
        let a1 = r.receive(try i.start())
        #expect(a1.contains { if case .consumePairingCode = $0 { return true } else { return false } })
        let b1 = i.receive(try #require(Self.sent(a1).first))
        let a2 = r.receive(try #require(Self.sent(b1).first))
        var desktopPSK: [UInt8] = []
        for case .pairingConfirmed(let outcome) in a2 {
            #expect(outcome.peerKey == phone.publicKey)
            #expect(outcome.peerName == "pixel")
            desktopPSK = outcome.sessionPSK
        }
        let b2 = i.receive(try #require(Self.sent(a2).first))
        var phonePSK: [UInt8] = []
        for case .paired(let result) in b2 {
            #expect(result.desktopKey == desktop.publicKey)
            #expect(result.desktopName == "desk")
            phonePSK = result.sessionPSK
        }
        return (desktopPSK, phonePSK)
    }

    @Test func pairingDerivesTheSamePSKOnBothSides() throws {
        let (d, p) = try pair()
        #expect(d.count == 32)
        #expect(d == p)
        #expect(d != secret)
    }

    @Test func wrongPairingSecretFailsSilentlyOnMessage1() throws {
        var r = responder(.pair, secret: secret)
        var i = try InitiatorMachine(intent: .pair, localStatic: phone, desktopKey: desktop.publicKey,
                                     psk: SecureRandom.bytes(32), firstMessage: .pair(name: "evil"))
        let actions = r.receive(try i.start())
        #expect(Self.sent(actions).isEmpty)  // never answers
        #expect(actions.contains { if case .pairingAttemptFailed = $0 { return true } else { return false } })
        #expect(actions.contains { if case .close = $0 { return true } else { return false } })
    }

    @Test func noActiveCodeRefusesPairing() throws {
        var r = responder(.pair, secret: nil)
        var i = try InitiatorMachine(intent: .pair, localStatic: phone, desktopKey: desktop.publicKey, psk: secret,
                                     firstMessage: .pair(name: "x"))
        #expect(Self.sent(r.receive(try i.start())).isEmpty)
    }

    @Test func pairingHandshakeCannotBeReplayedAsSession() throws {
        // Same psk, but the prologue binds the intent: a pairing message 1 does not open a session.
        var r = responder(.session, secret: nil, psks: [phone.publicKey: secret])
        var i = try InitiatorMachine(intent: .pair, localStatic: phone, desktopKey: desktop.publicKey, psk: secret,
                                     firstMessage: .pair(name: "x"))
        let actions = r.receive(try i.start())
        #expect(Self.sent(actions).isEmpty)
        #expect(!r.isEstablished)
    }

    func openSession(psk: [UInt8], delivered: UInt64 = 0) throws -> (ResponderMachine, InitiatorMachine) {
        var r = responder(.session, secret: nil, psks: [phone.publicKey: psk], delivered: delivered)
        var i = try InitiatorMachine(intent: .session, localStatic: phone, desktopKey: desktop.publicKey, psk: psk,
                                     firstMessage: .hello(agent: "test"))
        let a1 = r.receive(try i.start())
        // Message 1 alone does not authenticate (a replay would repeat it): only message 2 goes out.
        #expect(!a1.contains { if case .authenticated = $0 { return true } else { return false } })
        #expect(a1.count == 1 && !r.isEstablished)
        let b1 = i.receive(try #require(Self.sent(a1).first))
        #expect(b1.contains { if case .established = $0 { return true } else { return false } })
        return (r, i)
    }

    @Test func sessionResumeChunkAck() throws {
        let (psk, _) = try pair()
        var (r, i) = try openSession(psk: psk, delivered: 7)
        let resume = r.receive(try #require(Self.sent(i.encryptAndSend(.resume(session: "s", delivered: nil))).first))
        let answer = i.receive(try #require(Self.sent(resume).first))
        guard case .received(.resume("s", 7))? = answer.first else { Issue.record("no resume answer: \(answer)"); return }
        let deliver = r.receive(try #require(Self.sent(i.encryptAndSend(
            .chunks(session: "s", [Chunk(seq: 8, text: "a"), Chunk(seq: 9, text: "b")]))).first))
        guard case .deliver(let device, "s", let chunks)? = deliver.first else { Issue.record("no delivery"); return }
        #expect(device == KeySchedule.deviceID(of: phone.publicKey))
        #expect(chunks.map(\.text) == ["a", "b"])
        let ack = i.receive(try #require(Self.sent(r.acknowledge(session: "s", through: 9)).first))
        guard case .received(.ack("s", 9))? = ack.first else { Issue.record("no ack"); return }
    }

    @Test func unknownTypeGetsAnErrorAndTheSessionContinues() throws {
        var (r, i) = try openSession(psk: SecureRandom.bytes(32))
        // Encrypt a hand-made unknown message with the initiator's transport.
        guard case .established = i.state, i.session != nil else { Issue.record("not established"); return }
        let frame = try #require(try i.session?.encrypt(Array(#"{"type":"teleport","to":"mars"}"#.utf8)))
        let reply = r.receive(frame)
        let answer = i.receive(try #require(Self.sent(reply).first))
        guard case .received(.error(let code, _, _))? = answer.first else { Issue.record("no error reply"); return }
        #expect(code == .unknownType)
        #expect(r.isEstablished)
        let ok = r.receive(try #require(Self.sent(i.encryptAndSend(.chunk(session: "s", Chunk(seq: 1, text: "x")))).first))
        #expect(ok.contains { if case .deliver = $0 { return true } else { return false } })
    }

    /// Messages whose error reply quotes what the peer sent: a duplicate key of 16,370 NELs (C1 controls, 2 bytes
    /// of UTF-8 each, 6 once escaped in JSON), and an unknown type of one grapheme cluster (a base and 32,750
    /// combining marks) or of 600 marks. Each is answered with an `error` the peer's decoder accepts (its message at
    /// most 1,024 bytes) and the session goes on; the desktop's reply was 98 KB and 65 KB (over a Noise message:
    /// the desktop closed with "encryption failed") and 1,277 bytes (which the client dropped as too long).
    static func repeated(_ bytes: [UInt8], _ count: Int) -> [UInt8] { Array(Array(repeating: bytes, count: count).joined()) }
    static let quotingReplies: [[UInt8]] = {
        let nels = repeated([0xC2, 0x85], 16_370)
        let duplicateKey = Array("{\"".utf8) + nels + Array("\":1,\"".utf8) + nels + Array("\":1}".utf8)
        let oneCluster = Array("{\"type\":\"x".utf8) + repeated([0xCC, 0x81], 32_750) + Array("\"}".utf8)
        let shorterCluster = Array("{\"type\":\"x".utf8) + repeated([0xCC, 0x81], 600) + Array("\"}".utf8)
        return [duplicateKey, oneCluster, shorterCluster]
    }()

    @Test(arguments: 0..<3)
    func anErrorReplyQuotingThePeerStaysWithinItsBounds(_ which: Int) throws {
        let hostile = Self.quotingReplies[which]
        var (r, i) = try openSession(psk: SecureRandom.bytes(32))
        guard case .established = i.state, i.session != nil else { Issue.record("not established"); return }
        #expect(hostile.count <= 65_519)
        let reply = r.receive(try #require(try i.session?.encrypt(hostile)))
        #expect(!reply.contains { if case .close = $0 { return true } else { return false } })
        let answer = i.receive(try #require(Self.sent(reply).first))
        guard case .received(.error(_, let text, _))? = answer.first else { Issue.record("no error reply: \(answer)"); return }
        #expect(text.utf8.count <= 1_024)  // MessageCodec.maxErrorMessageBytes
        #expect(r.isEstablished)
        let ok = r.receive(try #require(Self.sent(i.encryptAndSend(.chunk(session: "s", Chunk(seq: 1, text: "x")))).first))
        #expect(ok.contains { if case .deliver = $0 { return true } else { return false } })
    }

    /// An undecryptable frame closes the initiator: its transport (and keys) are dropped and it seals nothing more.
    @Test func anUndecryptableFrameDropsTheInitiatorsTransport() throws {
        var (r, i) = try openSession(psk: SecureRandom.bytes(32))
        #expect(i.isEstablished && i.session != nil)
        let delivered = r.receive(try #require(Self.sent(i.encryptAndSend(.chunk(session: "s", Chunk(seq: 1, text: "x")))).first))
        #expect(delivered.contains { if case .deliver = $0 { return true } else { return false } })
        var reply = try #require(Self.sent(r.acknowledge(session: "s", through: 1)).first)
        reply[reply.count - 1] ^= 0x01
        let actions = i.receive(reply)
        #expect(actions.contains { if case .close = $0 { return true } else { return false } })
        #expect(!i.isEstablished)
        #expect(i.session == nil)
        guard case .notReady = i.seal(encoded: Array(#"{"type":"bye"}"#.utf8)) else {
            Issue.record("a closed initiator sealed a frame")
            return
        }
    }

    @Test func flippedBitClosesWithoutDelivering() throws {
        var (r, i) = try openSession(psk: SecureRandom.bytes(32))
        var frame = try #require(Self.sent(i.encryptAndSend(.chunk(session: "s", Chunk(seq: 1, text: "x")))).first)
        frame[frame.count / 2] ^= 0x01
        let actions = r.receive(frame)
        #expect(!actions.contains { if case .deliver = $0 { return true } else { return false } })
        #expect(actions.contains { if case .close = $0 { return true } else { return false } })
        #expect(r.receive(frame).isEmpty)  // closed for good
        #expect(r.session == nil, "the responder's transport (its keys) went with the close")
        #expect(r.acknowledgeFrame(session: "s", through: 1) == nil, "a closed responder seals nothing")
        #expect(r.encryptAndSend(.ack(session: "s", seq: 1)).isEmpty)
    }

    @Test func unknownOrRevokedDeviceIsRefusedWithoutAnswer() throws {
        var r = responder(.session, secret: nil, psks: [:])
        var i = try InitiatorMachine(intent: .session, localStatic: phone, desktopKey: desktop.publicKey,
                                     psk: SecureRandom.bytes(32), firstMessage: .hello(agent: "x"))
        let actions = r.receive(try i.start())
        #expect(Self.sent(actions).isEmpty)
        #expect(!r.isEstablished)
    }

    @Test func wrongPSKForAKnownDeviceIsRefused() throws {
        var r = responder(.session, secret: nil, psks: [phone.publicKey: SecureRandom.bytes(32)])
        var i = try InitiatorMachine(intent: .session, localStatic: phone, desktopKey: desktop.publicKey,
                                     psk: SecureRandom.bytes(32), firstMessage: .hello(agent: "x"))
        #expect(Self.sent(r.receive(try i.start())).isEmpty)
    }

    @Test func impostorDesktopFailsAtTheClient() throws {
        // The client dials what mDNS said; someone else answers with another key: message 2 does not verify.
        let psk = SecureRandom.bytes(32)
        let impostor = X25519PrivateKey()
        var r = ResponderMachine(intent: .session, context: ResponderContext(
            localStatic: impostor, localName: "evil", pairingSecret: { nil }, sessionPSK: { _ in try? SymmetricKey(bytes: psk) },
            delivered: { _, _ in 0 }))
        var i = try InitiatorMachine(intent: .session, localStatic: phone, desktopKey: desktop.publicKey, psk: psk,
                                     firstMessage: .hello(agent: "x"))
        let a = r.receive(try i.start())
        // The impostor cannot even read message 1 (it is encrypted to the real desktop's key).
        #expect(Self.sent(a).isEmpty)
    }

    @Test func oversizeFrameIsRejectedBeforeParsing() {
        var r = responder(.session, secret: nil)
        let actions = r.receive([UInt8](repeating: 0, count: SpeakBridgeProtocol.maxFrameSize + 1))
        #expect(actions.contains { if case .close = $0 { return true } else { return false } })
    }
}
