// The two CipherStates from Split(), oriented for one role: one to send, one to receive. Empty ad throughout.
internal import SpeakBridgeSupport

/// Transport-phase encryption after a completed handshake (spec §5.3: "CipherState objects … used for transport").
///
/// Messages must be decrypted in the order they were encrypted: each direction has its own counter nonce, so a
/// replayed, dropped or reordered message fails to authenticate. Any failure to decrypt (tampering, replay,
/// oversize input) leaves the transport unusable: later calls throw `.handshakeState`, since on a reliable
/// stream such a failure means the session is broken. A too-large plaintext passed to `encrypt` is only
/// rejected; it consumes no nonce.
public struct NoiseTransport: Sendable {
    private var sending: CipherState
    private var receiving: CipherState
    private var failed = false

    init(sending: CipherState, receiving: CipherState) {
        self.sending = sending
        self.receiving = receiving
    }

    /// Encrypts one transport message: plaintext.count + 16 bytes, at most `NoiseLimits.maxMessageLength`.
    public mutating func encrypt(_ plaintext: [UInt8]) throws -> [UInt8] {
        try checkUsable()
        guard plaintext.count <= NoiseLimits.maxTransportPayloadLength else { throw CryptoError.messageTooLarge }
        do {
            return try sending.encryptWithAd([], plaintext)
        } catch {
            fail()
            throw error
        }
    }

    /// `encrypt`, over `message` itself: it ends as the frame (`encrypt`'s result), with no second array. On a
    /// throw `message` holds no usable frame (and, as with `encrypt`, a too-large one consumed no nonce).
    public mutating func encrypt(inPlace message: inout [UInt8]) throws {
        try checkUsable()
        guard message.count <= NoiseLimits.maxTransportPayloadLength else { throw CryptoError.messageTooLarge }
        do {
            try sending.encryptWithAd([], inPlace: &message)
        } catch {
            fail()
            throw error
        }
    }

    /// Decrypts the next transport message from the peer.
    public mutating func decrypt(_ ciphertext: [UInt8]) throws -> [UInt8] {
        try checkUsable()
        do {
            guard ciphertext.count <= NoiseLimits.maxMessageLength else { throw CryptoError.messageTooLarge }
            guard ciphertext.count >= NoiseLimits.tagLength else { throw CryptoError.messageTooShort }
            return try receiving.decryptWithAd([], ciphertext)
        } catch {
            fail()
            throw error
        }
    }

    private func checkUsable() throws {
        guard !failed else { throw CryptoError.handshakeState("transport unusable after an earlier failure") }
    }

    private mutating func fail() {
        failed = true
        sending.wipe()
        receiving.wipe()
    }
}

/// Hands the transport out of a completed HandshakeState exactly once, so two copies of the same CipherStates
/// (which would reuse nonces) can never both be in use. Copies of a HandshakeState share one handoff.
final class TransportHandoff: Sendable {
    private let slot: Locked<NoiseTransport?>

    init(_ transport: NoiseTransport) {
        slot = Locked(transport)
    }

    func take() -> NoiseTransport? {
        slot.withLock { value in
            let taken = value
            value = nil
            return taken
        }
    }
}
