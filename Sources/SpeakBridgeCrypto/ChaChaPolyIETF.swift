// ChaCha20-Poly1305 with a 96-bit nonce (RFC 8439), via crypto_aead_chacha20poly1305_ietf_*.

public enum ChaChaPolyIETF {
    /// Key size in bytes.
    public static let keyByteCount = 32
    /// Nonce size in bytes (IETF variant: 96 bits).
    public static let nonceByteCount = SodiumAEAD.nonceByteCount
    /// Poly1305 tag size in bytes, appended to every ciphertext.
    public static let tagByteCount = SodiumAEAD.tagByteCount

    /// Returns ciphertext || tag (plaintext.count + 16 bytes).
    public static func seal(key: SymmetricKey, nonce: [UInt8], plaintext: [UInt8], ad: [UInt8]) throws -> [UInt8] {
        try SodiumAEAD.chaCha20Poly1305.seal(key: key, nonce: nonce, plaintext: plaintext, ad: ad)
    }

    /// Verifies the tag and returns the plaintext; throws `.authenticationFailure` on any mismatch.
    public static func open(key: SymmetricKey, nonce: [UInt8], ciphertext: [UInt8], ad: [UInt8]) throws -> [UInt8] {
        try SodiumAEAD.chaCha20Poly1305.open(key: key, nonce: nonce, ciphertext: ciphertext, ad: ad)
    }
}
