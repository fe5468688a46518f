// The one error type of SpeakBridgeCrypto. A length error, a failed MAC and a C failure never look alike.

/// Everything that can go wrong in SpeakBridgeCrypto.
///
/// Hostile input surfaces as `.authenticationFailure`, `.weakPublicKey`, `.messageTooShort` or
/// `.messageTooLarge`; callers should drop the peer without telling it which.
public enum CryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A key, nonce or other fixed-size value had the wrong number of bytes.
    case invalidLength(what: String, expected: Int, actual: Int)
    /// The X25519 result was all zeros: the peer sent a low-order point.
    case weakPublicKey
    /// An AEAD ciphertext did not authenticate (wrong key, wrong nonce, wrong associated data or tampering).
    case authenticationFailure
    /// A CipherState reached the reserved nonce 2^64-1; the session must end.
    case nonceExhausted
    /// The API was used out of order or after an earlier failure; the detail is for developers, not peers.
    case handshakeState(String)
    /// A message was shorter than its fixed fields require.
    case messageTooShort
    /// A message (or the message a payload would produce) exceeds `NoiseLimits.maxMessageLength`.
    case messageTooLarge
    /// A psk pattern was used without a psk and without a resolver that could supply one.
    case missingPSK
    /// The responder's psk resolver did not recognise the initiator's static key.
    case unknownPeer
    /// `sodium_init()` failed, so no libsodium primitive can be trusted.
    case sodiumUnavailable
    /// A cipher this CPU cannot run (libsodium's AES-GCM needs AES-NI); the detail names it.
    case cipherUnavailable(String)

    public var description: String {
        switch self {
        case let .invalidLength(what, expected, actual):
            return "invalid length for \(what): expected \(expected) bytes, got \(actual)"
        case .weakPublicKey: return "weak (low-order) public key"
        case .authenticationFailure: return "authentication failure"
        case .nonceExhausted: return "nonce exhausted"
        case let .handshakeState(detail): return "handshake state: \(detail)"
        case .messageTooShort: return "message too short"
        case .messageTooLarge: return "message too large"
        case .missingPSK: return "missing pre-shared key"
        case .unknownPeer: return "unknown peer"
        case .sodiumUnavailable: return "libsodium is unavailable"
        case let .cipherUnavailable(what): return "cipher unavailable: \(what)"
        }
    }
}
