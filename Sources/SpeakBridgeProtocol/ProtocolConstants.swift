import SpeakBridgeCrypto

/// Every name, label and limit of protocol version 1, in one place. `Pairing/PROTOCOL.md` explains each.
public enum SpeakBridgeProtocol {
    public static let version = 1
    /// WebSocket subprotocol (Sec-WebSocket-Protocol).
    public static let subprotocol = "speakbridge.v1"
    public static let pairPath = "/speakbridge.v1/pair"
    public static let sessionPath = "/speakbridge.v1/session"
    /// The one Noise pattern used for pairing and sessions; only the psk and the prologue differ.
    public static let noisePattern = NoiseHandshakePattern.IKpsk1
    /// Info label of the HKDF that turns a pairing into the per-pair session psk.
    public static let sessionPSKLabel = "speakbridge.v1 session psk"
    public static let defaultPort = 47_810
    /// mDNS service type published by the desktop.
    public static let serviceType = "_speakbridge._tcp"

    /// Largest WebSocket message (= Noise message) either side accepts.
    public static let maxFrameSize = 65_535
    /// Largest chunk text in UTF-8 bytes: a long paragraph, far below one frame.
    public static let maxChunkTextBytes = 16_384
    /// Most chunks in one `chunks` batch.
    public static let maxChunksPerBatch = 512
    /// Seconds a pairing code stays valid.
    public static let pairingCodeLifetime = 120
    /// Failed pairing handshakes after which a code is dead.
    public static let pairingMaxFailures = 3
    /// Seconds from TCP accept until a connection must be authenticated (HTTP upgrade and Noise handshake).
    public static let handshakeTimeout = 5
    /// Unauthenticated connections (TCP accepted, not yet authenticated) the desktop holds at once; when full, a
    /// new one evicts the oldest of the source address holding the most.
    public static let maxUnauthenticated = 64
    /// Unauthenticated connections one source address (IPv4 address, IPv6 /64) may hold; more are refused at accept.
    public static let maxUnauthenticatedPerAddress = 8
    /// Largest device name, in UTF-8 bytes.
    public static let maxNameBytes = 64
    /// Largest desktop name (`serve --name`), in UTF-8 bytes: it is both `pair-accept`'s `name` (at most
    /// `maxNameBytes`) and the mDNS instance name, a DNS label (at most 63).
    public static let maxDesktopNameBytes = 63
}

/// What a connection is for. It selects the WebSocket path and is bound into the Noise prologue,
/// so a pairing handshake can never be replayed as a session handshake or the reverse.
public enum ConnectionIntent: String, Sendable, CaseIterable {
    case pair
    case session

    public var path: String {
        switch self {
        case .pair: return SpeakBridgeProtocol.pairPath
        case .session: return SpeakBridgeProtocol.sessionPath
        }
    }

    public init?(path: String) {
        switch path {
        case SpeakBridgeProtocol.pairPath: self = .pair
        case SpeakBridgeProtocol.sessionPath: self = .session
        default: return nil
        }
    }

    /// Noise prologue: ASCII `speakbridge.v1 pair` or `speakbridge.v1 session`.
    public var prologue: [UInt8] { Array("speakbridge.v1 \(rawValue)".utf8) }
}

/// Key material derivations named in PROTOCOL.md.
public enum KeySchedule {
    /// Per-pair psk: HKDF-SHA256(ikm = pairing secret, salt = pairing handshake hash, info = label, L = 32).
    /// Secret in, secret out: both stay in self-wiping storage.
    public static func sessionPSK(pairingSecret: SymmetricKey, pairingHandshakeHash: [UInt8]) -> SymmetricKey {
        HKDFSHA256.deriveKey(ikm: pairingSecret, salt: pairingHandshakeHash,
                             info: Array(SpeakBridgeProtocol.sessionPSKLabel.utf8))
    }

    /// The same derivation on plain bytes, for the vector generator and the walkthrough example.
    public static func sessionPSK(pairingSecret: [UInt8], pairingHandshakeHash: [UInt8]) -> [UInt8] {
        HKDFSHA256.deriveKey(ikm: pairingSecret, salt: pairingHandshakeHash,
                             info: Array(SpeakBridgeProtocol.sessionPSKLabel.utf8), outputByteCount: 32)
    }

    /// The device ID (fingerprint) of a static public key.
    public static func deviceID(of key: X25519PublicKey) -> DeviceID {
        DeviceID(publicKeyDigest: SHA256.hash(key.rawRepresentation))
    }
}
