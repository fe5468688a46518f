import SpeakBridgeCrypto
import Testing
@testable import SpeakBridgeProtocol

/// The desktop's state machine with the AESGCM cipher (the browser route, subprotocol `speakbridge.v1.aesgcm`):
/// an AESGCM initiator pairs, a ChaChaPoly message 1 is refused by an AESGCM responder and the reverse.
@Suite("ResponderMachine cipher selection", .enabled(if: NoiseCipher.aesGCM.isAvailable, "this CPU has no AES-NI"))
struct ResponderCipherTests {
    let desktop = X25519PrivateKey()
    let phone = X25519PrivateKey()
    let secret = SecureRandom.bytes(32)

    func responder(_ cipher: NoiseCipher) -> ResponderMachine {
        ResponderMachine(intent: .pair, context: ResponderContext(
            localStatic: desktop, localName: "desk", pairingSecret: { [secret] in try? SymmetricKey(bytes: secret) },
            sessionPSK: { _ in nil }, delivered: { _, _ in 0 }), cipher: cipher)
    }

    func initiator(_ cipher: NoiseCipher) throws -> HandshakeState {
        try HandshakeState(pattern: SpeakBridgeProtocol.noisePattern, cipher: cipher, role: .initiator,
                           prologue: ConnectionIntent.pair.prologue, localStatic: phone,
                           remoteStatic: desktop.publicKey, psk: try SymmetricKey(bytes: secret))
    }

    @Test func subprotocolsSelectTheCipher() {
        #expect(SpeakBridgeProtocol.cipher(forSubprotocol: "speakbridge.v1") == .chaChaPoly)
        #expect(SpeakBridgeProtocol.cipher(forSubprotocol: "speakbridge.v1.aesgcm") == .aesGCM)
        #expect(SpeakBridgeProtocol.cipher(forSubprotocol: "speakbridge.v2") == nil)
        #expect(ResponderMachine(intent: .pair, context: responder(.aesGCM).context).cipher == .chaChaPoly)
    }

    @Test func anAESGCMInitiatorPairsWithAnAESGCMResponder() throws {
        var machine = responder(.aesGCM)
        var client = try initiator(.aesGCM)
        let actions = machine.receive(try client.writeMessage(payload: MessageCodec.encode(.pair(name: "browser"))))
        let message2 = try #require(MachineTests.sent(actions).first)
        let payload = try client.readMessage(message2)
        guard case .pairAccept(let name, _) = try MessageCodec.decode(payload) else {
            Issue.record("expected pair-accept")
            return
        }
        #expect(name == "desk")
        var transport = try client.transport()
        let confirmed = machine.receive(try transport.encrypt(MessageCodec.encode(.pairConfirm)))
        #expect(confirmed.contains { if case .pairingConfirmed = $0 { return true } else { return false } })
        let paired = try transport.decrypt(try #require(MachineTests.sent(confirmed).first))
        #expect(try MessageCodec.decode(paired) == .paired)
    }

    @Test(arguments: [(NoiseCipher.chaChaPoly, NoiseCipher.aesGCM), (.aesGCM, .chaChaPoly)])
    func aMismatchedCipherFailsOnMessage1(client: NoiseCipher, desktopCipher: NoiseCipher) throws {
        var machine = responder(desktopCipher)
        var initiator = try initiator(client)
        let actions = machine.receive(try initiator.writeMessage(payload: MessageCodec.encode(.pair(name: "x"))))
        #expect(MachineTests.sent(actions).isEmpty)
        #expect(actions.contains { if case .pairingAttemptFailed = $0 { return true } else { return false } })
    }
}
