// AES-256-GCM with a 96-bit nonce, via libsodium's crypto_aead_aes256gcm_*. libsodium implements it only with
// the AES-NI and CLMUL instructions: `isAvailable` says whether this CPU has them, and every call checks it.
internal import CSodium

public enum AESGCM {
    /// Key size in bytes.
    public static let keyByteCount = 32
    /// Nonce size in bytes.
    public static let nonceByteCount = 12
    /// GHASH tag size in bytes, appended to every ciphertext.
    public static let tagByteCount = 16

    /// True when libsodium can run AES-256-GCM on this CPU (AES-NI + CLMUL). Without it the browser route, whose
    /// only AEAD is AES-GCM, cannot be offered.
    public static let isAvailable: Bool = Sodium.isAvailable && crypto_aead_aes256gcm_is_available() == 1

    /// Returns ciphertext || tag (plaintext.count + 16 bytes).
    public static func seal(key: SymmetricKey, nonce: [UInt8], plaintext: [UInt8], ad: [UInt8]) throws -> [UInt8] {
        try ensureAvailable()
        try checkNonce(nonce)
        // libsodium's limit for one AES-GCM message is far above any Noise message; refuse beyond it.
        guard plaintext.count <= Int(clamping: crypto_aead_aes256gcm_messagebytes_max()) else {
            throw CryptoError.messageTooLarge
        }
        let outputCount = plaintext.count + tagByteCount
        return try [UInt8](unsafeUninitializedCapacity: outputCount) { out, initialized in
            var written: UInt64 = 0
            let rc = key.storage.withUnsafeBytes { keyBytes in
                withSodiumInput(keyBytes) { k, _ in
                    withSodiumInput(plaintext) { m, mCount in
                        withSodiumInput(ad) { a, aCount in
                            withSodiumInput(nonce) { npub, _ in
                                // Why unsafe: `out` has room for plaintext + ABYTES, the most libsodium writes.
                                crypto_aead_aes256gcm_encrypt(
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
        try ensureAvailable()
        try checkNonce(nonce)
        guard ciphertext.count >= tagByteCount else { throw CryptoError.messageTooShort }
        let outputCount = ciphertext.count - tagByteCount
        var plaintext = [UInt8](repeating: 0, count: Swift.max(outputCount, 1))
        var written: UInt64 = 0
        let rc = key.storage.withUnsafeBytes { keyBytes in
            withSodiumInput(keyBytes) { k, _ in
                plaintext.withUnsafeMutableBytes { out in
                    withSodiumInput(ciphertext) { c, cCount in
                        withSodiumInput(ad) { a, aCount in
                            withSodiumInput(nonce) { npub, _ in
                                // Why unsafe: `out` has room for ciphertext - ABYTES, the most libsodium writes.
                                crypto_aead_aes256gcm_decrypt(
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

    private static func ensureAvailable() throws {
        try Sodium.ensureAvailable()
        guard isAvailable else { throw CryptoError.cipherUnavailable("AES-256-GCM (this CPU has no AES-NI)") }
    }

    private static func checkNonce(_ nonce: [UInt8]) throws {
        guard nonce.count == nonceByteCount else {
            throw CryptoError.invalidLength(what: "AES-GCM nonce", expected: nonceByteCount, actual: nonce.count)
        }
    }
}
