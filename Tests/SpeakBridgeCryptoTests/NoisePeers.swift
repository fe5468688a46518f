// Test fixture: two fresh random peers for any IK-family pattern.
import SpeakBridgeCrypto

struct NoisePeers {
    let pattern: NoiseHandshakePattern
    let cipher: NoiseCipher
    let initiatorStatic = X25519PrivateKey()
    let responderStatic = X25519PrivateKey()
    let psk = SymmetricKey.random()
    let prologue = Array("speakbridge test v1".utf8)

    init(_ pattern: NoiseHandshakePattern, cipher: NoiseCipher = .chaChaPoly) {
        self.pattern = pattern
        self.cipher = cipher
    }

    func initiator(responderKey: X25519PublicKey? = nil, psk overridePSK: SymmetricKey? = nil) throws -> HandshakeState {
        try HandshakeState(pattern: pattern, cipher: cipher, role: .initiator, prologue: prologue, localStatic: initiatorStatic,
                           remoteStatic: responderKey ?? responderStatic.publicKey,
                           psk: pattern.usesPSK ? (overridePSK ?? psk) : nil)
    }

    func responder(psk overridePSK: SymmetricKey? = nil, withoutPSK: Bool = false) throws -> HandshakeState {
        try HandshakeState(pattern: pattern, cipher: cipher, role: .responder, prologue: prologue, localStatic: responderStatic,
                           psk: pattern.usesPSK && !withoutPSK ? (overridePSK ?? psk) : nil)
    }

    /// Runs the whole handshake and returns both transports (initiator's first).
    func handshake() throws -> (NoiseTransport, NoiseTransport) {
        var initiator = try initiator()
        var responder = try responder()
        _ = try responder.readMessage(initiator.writeMessage(payload: []))
        _ = try initiator.readMessage(responder.writeMessage(payload: []))
        return (try initiator.transport(), try responder.transport())
    }
}
