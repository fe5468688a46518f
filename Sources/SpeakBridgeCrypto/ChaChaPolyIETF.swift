// ChaCha20-Poly1305 with a 96-bit nonce (RFC 8439), via crypto_aead_chacha20poly1305_ietf_*.
internal import CSodium

public enum ChaChaPolyIETF {
    /// Key size in bytes.
    public static let keyByteCount = 32
    /// Nonce size in bytes (IETF variant: 96 bits).
    public static let nonceByteCount = 12
    /// Poly1305 tag size in bytes, appended to every ciphertext.
    public static let tagByteCount = 16

    /// Returns ciphertext || tag (plaintext.count + 16 bytes).
    public static func seal(key: SymmetricKey, nonce: [UInt8], plaintext: [UInt8], ad: [UInt8]) throws -> [UInt8] {
        try Sodium.ensureAvailable()
        try checkNonce(nonce)
        let outputCount = plaintext.count + tagByteCount
        return try [UInt8](unsafeUninitializedCapacity: outputCount) { out, initialized in
            var written: UInt64 = 0
            let rc = key.storage.withUnsafeBytes { keyBytes in
                withSodiumInput(keyBytes) { k, _ in
                    withSodiumInput(plaintext) { m, mCount in
                        withSodiumInput(ad) { a, aCount in
                            withSodiumInput(nonce) { npub, _ in
                                // Why unsafe: `out` has room for plaintext + ABYTES, the most libsodium writes.
                                crypto_aead_chacha20poly1305_ietf_encrypt(
                                    UnsafeMutableRawBufferPointer(out).sodiumOutput, &written,
                                    m, UInt64(mCount), a, UInt64(aCount), nil, npub, k)
                            }
                        }
                    }
                }
            }
            try Sodium.check(rc, orThrow: .messageTooLarge)
            initialized = Int(written)
        }
    }

    /// Verifies the tag and returns the plaintext; throws `.authenticationFailure` on any mismatch.
    public static func open(key: SymmetricKey, nonce: [UInt8], ciphertext: [UInt8], ad: [UInt8]) throws -> [UInt8] {
        try Sodium.ensureAvailable()
        try checkNonce(nonce)
        guard ciphertext.count >= tagByteCount else { throw CryptoError.messageTooShort }
        let outputCount = ciphertext.count - tagByteCount
        // Allocate at least one byte so an empty plaintext still has a valid output pointer.
        var plaintext = [UInt8](repeating: 0, count: Swift.max(outputCount, 1))
        var written: UInt64 = 0
        let rc = key.storage.withUnsafeBytes { keyBytes in
            withSodiumInput(keyBytes) { k, _ in
                plaintext.withUnsafeMutableBytes { out in
                    withSodiumInput(ciphertext) { c, cCount in
                        withSodiumInput(ad) { a, aCount in
                            withSodiumInput(nonce) { npub, _ in
                                // Why unsafe: `out` has room for ciphertext - ABYTES, the most libsodium writes.
                                crypto_aead_chacha20poly1305_ietf_decrypt(
                                    out.sodiumOutput, &written, nil, c, UInt64(cCount), a, UInt64(aCount), npub, k)
                            }
                        }
                    }
                }
            }
        }
        try Sodium.check(rc, orThrow: .authenticationFailure)
        plaintext.removeLast(plaintext.count - Int(written))
        return plaintext
    }

    private static func checkNonce(_ nonce: [UInt8]) throws {
        guard nonce.count == nonceByteCount else {
            throw CryptoError.invalidLength(what: "ChaCha20-Poly1305 nonce", expected: nonceByteCount,
                                            actual: nonce.count)
        }
    }
}
