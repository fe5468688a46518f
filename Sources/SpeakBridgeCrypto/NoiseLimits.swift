// Wire sizes of Noise_IK*_25519_ChaChaPoly_SHA256, each a named constant (Noise revision 34, §3, §4, §7).

public enum NoiseLimits {
    /// Largest Noise message on the wire, handshake or transport (spec §3: 65535 bytes).
    public static let maxMessageLength = 65535
    /// DHLEN for Curve25519: an ephemeral or static public key on the wire.
    public static let dhLength = X25519PublicKey.byteCount
    /// Poly1305 tag added to every field encrypted once a key is set.
    public static let tagLength = ChaChaPolyIETF.tagByteCount
    /// HASHLEN for SHA-256: the handshake hash and chaining key.
    public static let hashLength = SHA256.byteCount
    /// Largest plaintext one transport message can carry.
    public static let maxTransportPayloadLength = maxMessageLength - tagLength
    /// Message 1 of IK, IKpsk1 and IKpsk2 (-> e, es, s, ss[, psk]) without its payload:
    /// e (32) + encrypted s (32 + 16) + payload tag (16) = 96.
    public static let handshakeMessage1Overhead = dhLength + (dhLength + tagLength) + tagLength
    /// Message 2 of IK, IKpsk1 and IKpsk2 (<- e, ee, se[, psk]) without its payload: e (32) + payload tag (16) = 48.
    public static let handshakeMessage2Overhead = dhLength + tagLength
}
