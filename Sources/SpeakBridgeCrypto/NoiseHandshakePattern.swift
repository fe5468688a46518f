// The three IK handshake patterns (spec §7.5 and §9.4) as token lists, and the two roles.

/// Which side of the handshake this party plays. IK's initiator knows the responder's static key in advance.
public enum NoiseRole: Sendable {
    case initiator, responder
}

/// The supported patterns, all with Curve25519 and SHA-256, and ChaChaPoly or AESGCM (`NoiseCipher`):
///
///     IK:                IKpsk1:                    IKpsk2:
///       <- s               <- s                       <- s
///       ...                ...                        ...
///       -> e, es, s, ss    -> e, es, s, ss, psk       -> e, es, s, ss
///       <- e, ee, se       <- e, ee, se               <- e, ee, se, psk
public enum NoiseHandshakePattern: Sendable, CaseIterable {
    case IK, IKpsk1, IKpsk2

    /// The full Noise protocol name with ChaChaPoly, e.g. "Noise_IKpsk1_25519_ChaChaPoly_SHA256".
    public var protocolName: String { protocolName(cipher: .chaChaPoly) }

    /// The full Noise protocol name, e.g. "Noise_IKpsk1_25519_AESGCM_SHA256".
    public func protocolName(cipher: NoiseCipher) -> String { "Noise_\(patternName)_25519_\(cipher.rawValue)_SHA256" }

    /// The pattern for a ChaChaPoly protocol name, or nil for anything else.
    public init?(protocolName: String) {
        guard let (pattern, cipher) = Self.parse(protocolName: protocolName), cipher == .chaChaPoly else { return nil }
        self = pattern
    }

    /// Pattern and cipher of a full protocol name, or nil for anything this module does not implement
    /// (other patterns, DH functions, ciphers or hashes).
    public static func parse(protocolName: String) -> (NoiseHandshakePattern, NoiseCipher)? {
        for pattern in allCases {
            for cipher in NoiseCipher.allCases where pattern.protocolName(cipher: cipher) == protocolName {
                return (pattern, cipher)
            }
        }
        return nil
    }

    /// True for the psk variants; they also MixKey() every ephemeral public key (spec §9.2).
    public var usesPSK: Bool { self != .IK }

    var patternName: String {
        switch self {
        case .IK: return "IK"
        case .IKpsk1: return "IKpsk1"
        case .IKpsk2: return "IKpsk2"
        }
    }

    /// Message patterns after the pre-message `<- s`; even indices are sent by the initiator.
    var messages: [[NoiseToken]] {
        switch self {
        case .IK: return [[.e, .es, .s, .ss], [.e, .ee, .se]]
        case .IKpsk1: return [[.e, .es, .s, .ss, .psk], [.e, .ee, .se]]
        case .IKpsk2: return [[.e, .es, .s, .ss], [.e, .ee, .se, .psk]]
        }
    }
}

/// A token of a message pattern (spec §7.1).
enum NoiseToken: Sendable {
    case e, s, ee, es, se, ss, psk
}
