// The two Noise cipher functions SpeakBridge speaks (spec §12.3 ChaChaPoly, §12.4 AESGCM). Native clients use
// ChaChaPoly; browsers, whose WebCrypto has AES-GCM but no ChaCha20-Poly1305, use AESGCM. Besides the primitive,
// the only difference is the nonce: 32 zero bits, then the 64-bit counter little-endian (ChaChaPoly) or
// big-endian (AESGCM).

/// The cipher part of a Noise protocol name.
public enum NoiseCipher: String, Sendable, CaseIterable {
    case chaChaPoly = "ChaChaPoly"
    case aesGCM = "AESGCM"

    /// Whether this machine can run the cipher (AESGCM needs AES-NI with libsodium).
    public var isAvailable: Bool {
        switch self {
        case .chaChaPoly: true
        case .aesGCM: AESGCM.isAvailable
        }
    }

    /// ENCRYPT(k, n, ad, plaintext).
    func seal(key: SymmetricKey, n: UInt64, plaintext: [UInt8], ad: [UInt8]) throws -> [UInt8] {
        switch self {
        case .chaChaPoly: try ChaChaPolyIETF.seal(key: key, nonce: nonceBytes(n), plaintext: plaintext, ad: ad)
        case .aesGCM: try AESGCM.seal(key: key, nonce: nonceBytes(n), plaintext: plaintext, ad: ad)
        }
    }

    /// DECRYPT(k, n, ad, ciphertext).
    func open(key: SymmetricKey, n: UInt64, ciphertext: [UInt8], ad: [UInt8]) throws -> [UInt8] {
        switch self {
        case .chaChaPoly: try ChaChaPolyIETF.open(key: key, nonce: nonceBytes(n), ciphertext: ciphertext, ad: ad)
        case .aesGCM: try AESGCM.open(key: key, nonce: nonceBytes(n), ciphertext: ciphertext, ad: ad)
        }
    }

    /// The 96-bit nonce: 32 bits of zeros followed by the 64-bit encoding of n, little-endian for ChaChaPoly
    /// (§12.3), big-endian for AESGCM (§12.4).
    func nonceBytes(_ n: UInt64) -> [UInt8] {
        var nonce = [UInt8](repeating: 0, count: 12)
        for byteIndex in 0..<8 {
            let shift = UInt64(8 * (self == .chaChaPoly ? byteIndex : 7 - byteIndex))
            nonce[4 + byteIndex] = UInt8(truncatingIfNeeded: n >> shift)
        }
        return nonce
    }
}
