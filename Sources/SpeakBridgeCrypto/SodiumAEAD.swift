// The one seal/open over libsodium's IETF-style AEADs. ChaCha20-Poly1305 (RFC 8439) and AES-256-GCM share the
// signature (c, clen_p, m, mlen, ad, adlen, nsec, npub, k) and the sizes (32-byte key, 12-byte nonce, 16-byte tag);
// only the functions differ. AES-256-GCM also seals and opens with a key expanded once (`AESGCMKeyState`, libsodium's
// `_afternm` functions, the same signature with the state in place of k): the same bytes without the key
// expansion on every message.
internal import CSodium
internal import SpeakBridgeSupport

struct SodiumAEAD: Sendable {
    // Exactly the imported signatures (libsodium's nonnull annotations decide which pointers are optional).
    typealias Encrypt = @convention(c) (
        UnsafeMutablePointer<UInt8>, UnsafeMutablePointer<UInt64>?, UnsafePointer<UInt8>?, UInt64,
        UnsafePointer<UInt8>?, UInt64, UnsafePointer<UInt8>?, UnsafePointer<UInt8>, UnsafePointer<UInt8>
    ) -> Int32
    typealias Decrypt = @convention(c) (
        UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt64>?, UnsafeMutablePointer<UInt8>?,
        UnsafePointer<UInt8>, UInt64, UnsafePointer<UInt8>?, UInt64, UnsafePointer<UInt8>, UnsafePointer<UInt8>
    ) -> Int32

    typealias EncryptDetached = @convention(c) (
        UnsafeMutablePointer<UInt8>, UnsafeMutablePointer<UInt8>, UnsafeMutablePointer<UInt64>?,
        UnsafePointer<UInt8>?, UInt64, UnsafePointer<UInt8>?, UInt64, UnsafePointer<UInt8>?, UnsafePointer<UInt8>,
        UnsafePointer<UInt8>
    ) -> Int32

    /// One sealing call with the key already bound: (c, clen_p, m, mlen, ad, adlen, npub).
    private typealias SealCall = (UnsafeMutablePointer<UInt8>, UnsafeMutablePointer<UInt64>, UnsafePointer<UInt8>,
                                  UInt64, UnsafePointer<UInt8>, UInt64, UnsafePointer<UInt8>) -> Int32
    /// One opening call with the key already bound: (m, mlen_p, c, clen, ad, adlen, npub).
    private typealias OpenCall = (UnsafeMutablePointer<UInt8>, UnsafeMutablePointer<UInt64>, UnsafePointer<UInt8>,
                                  UInt64, UnsafePointer<UInt8>, UInt64, UnsafePointer<UInt8>) -> Int32

    /// For error messages: "ChaCha20-Poly1305", "AES-GCM".
    let name: String
    let encrypt: Encrypt
    let decrypt: Decrypt

    static let nonceByteCount = 12
    static let tagByteCount = 16

    /// Detached encryption that may write the ciphertext over the plaintext (`sealInPlace`); nil: not offered.
    let encryptDetached: EncryptDetached?

    static let chaCha20Poly1305 = SodiumAEAD(
        name: "ChaCha20-Poly1305", encrypt: crypto_aead_chacha20poly1305_ietf_encrypt,
        decrypt: crypto_aead_chacha20poly1305_ietf_decrypt,
        encryptDetached: crypto_aead_chacha20poly1305_ietf_encrypt_detached)
    // AES-GCM seals into a new array only (libsodium documents in-place use for ChaCha20-Poly1305, which XORs the
    // key stream over the message and then authenticates the ciphertext).
    static let aes256GCM = SodiumAEAD(
        name: "AES-GCM", encrypt: crypto_aead_aes256gcm_encrypt, decrypt: crypto_aead_aes256gcm_decrypt,
        encryptDetached: nil)

    /// `seal` over `buffer` itself: its bytes become the ciphertext and the tag is appended, so `buffer` ends as
    /// what `seal` returns (no second array, no copy). On a throw `buffer` holds no usable message.
    func sealInPlace(key: SymmetricKey, nonceBytes nonce: UnsafeRawBufferPointer, buffer: inout [UInt8],
                     ad: [UInt8]) throws {
        guard let encryptDetached else {
            buffer = try seal(key: key, nonceBytes: nonce, plaintext: buffer, ad: ad)
            return
        }
        try Sodium.ensureAvailable()
        try checkNonce(nonce.count)
        let count = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: Self.tagByteCount))  // the tag's room, after the message
        let rc = key.storage.withUnsafeBytes { keyBytes in
            withSodiumInput(keyBytes) { k, _ in
                withSodiumInput(ad) { a, aCount in
                    withSodiumInput(nonce) { npub, _ in
                        buffer.withUnsafeMutableBufferPointer { b in
                            // Why unsafe: c and m are the same `count` bytes (libsodium XORs the key stream in
                            // place), the 16-byte tag goes right after them, into the room appended above.
                            let base = UnsafeMutableRawBufferPointer(b).sodiumOutput
                            return encryptDetached(base, base + count, nil, UnsafePointer(base), UInt64(count),
                                                   a, UInt64(aCount), nil, npub, k)
                        }
                    }
                }
            }
        }
        try Sodium.check(rc, orThrow: .messageTooLarge)
    }

    /// Returns ciphertext || tag (plaintext.count + 16 bytes).
    func seal(key: SymmetricKey, nonce: [UInt8], plaintext: [UInt8], ad: [UInt8]) throws -> [UInt8] {
        try nonce.withUnsafeBytes { try seal(key: key, nonceBytes: $0, plaintext: plaintext, ad: ad) }
    }

    /// The same, the nonce in any memory (a Noise cipher builds it on the stack: no array per message).
    func seal(key: SymmetricKey, nonceBytes nonce: UnsafeRawBufferPointer, plaintext: [UInt8],
              ad: [UInt8]) throws -> [UInt8] {
        try Sodium.ensureAvailable()
        return try key.storage.withUnsafeBytes { keyBytes in
            try withSodiumInput(keyBytes) { k, _ in
                try seal(nonceBytes: nonce, plaintext: plaintext, ad: ad) { c, written, m, mCount, a, aCount, npub in
                    encrypt(c, written, m, mCount, a, aCount, nil, npub, k)
                }
            }
        }
    }

    /// AES-256-GCM's `seal` with the key expanded once (`crypto_aead_aes256gcm_encrypt_afternm`): the same bytes
    /// as `aes256GCM.seal` under the key `state` was made from.
    static func sealAES256GCM(state: AESGCMKeyState, nonceBytes nonce: UnsafeRawBufferPointer, plaintext: [UInt8],
                              ad: [UInt8]) throws -> [UInt8] {
        try state.withUnsafeState { ctx in
            try aes256GCM.seal(nonceBytes: nonce, plaintext: plaintext, ad: ad) {
                c, written, m, mCount, a, aCount, npub in
                crypto_aead_aes256gcm_encrypt_afternm(c, written, m, mCount, a, aCount, nil, npub, ctx)
            }
        }
    }

    /// Verifies the tag and returns the plaintext; throws `.authenticationFailure` on any mismatch.
    func open(key: SymmetricKey, nonce: [UInt8], ciphertext: [UInt8], ad: [UInt8]) throws -> [UInt8] {
        try nonce.withUnsafeBytes { try open(key: key, nonceBytes: $0, ciphertext: ciphertext, ad: ad) }
    }

    /// The same, the nonce in any memory.
    func open(key: SymmetricKey, nonceBytes nonce: UnsafeRawBufferPointer, ciphertext: [UInt8],
              ad: [UInt8]) throws -> [UInt8] {
        try Sodium.ensureAvailable()
        return try key.storage.withUnsafeBytes { keyBytes in
            try withSodiumInput(keyBytes) { k, _ in
                try open(nonceBytes: nonce, ciphertext: ciphertext, ad: ad) { m, written, c, cCount, a, aCount, npub in
                    decrypt(m, written, nil, c, cCount, a, aCount, npub, k)
                }
            }
        }
    }

    /// AES-256-GCM's `open` with the key expanded once (`crypto_aead_aes256gcm_decrypt_afternm`).
    static func openAES256GCM(state: AESGCMKeyState, nonceBytes nonce: UnsafeRawBufferPointer, ciphertext: [UInt8],
                              ad: [UInt8]) throws -> [UInt8] {
        try state.withUnsafeState { ctx in
            try aes256GCM.open(nonceBytes: nonce, ciphertext: ciphertext, ad: ad) {
                m, written, c, cCount, a, aCount, npub in
                crypto_aead_aes256gcm_decrypt_afternm(m, written, nil, c, cCount, a, aCount, npub, ctx)
            }
        }
    }

    /// Seals into a new array of plaintext + 16 bytes through `call`, which has the key bound (`ByteArrays.make`: a
    /// paced line's frame without the standard library's generic allocation).
    private func seal(nonceBytes nonce: UnsafeRawBufferPointer, plaintext: [UInt8], ad: [UInt8],
                      _ call: SealCall) throws -> [UInt8] {
        try checkNonce(nonce.count)
        let outputCount = plaintext.count + Self.tagByteCount
        var rc: Int32 = -1
        let sealed = ByteArrays.make(capacity: outputCount) { out in
            var written: UInt64 = 0
            rc = withSodiumInput(plaintext) { m, mCount in
                withSodiumInput(ad) { a, aCount in
                    withSodiumInput(nonce) { npub, _ in
                        // Why unsafe: `out` has room for plaintext + ABYTES, the most libsodium writes.
                        call(UnsafeMutableRawBufferPointer(out).sodiumOutput, &written, m, UInt64(mCount),
                             a, UInt64(aCount), npub)
                    }
                }
            }
            return rc == 0 ? Swift.min(Int(clamping: written), outputCount) : 0
        }
        try Sodium.check(rc, orThrow: .messageTooLarge)
        return sealed
    }

    /// Opens into a new array through `call`, which has the key bound.
    private func open(nonceBytes nonce: UnsafeRawBufferPointer, ciphertext: [UInt8], ad: [UInt8],
                      _ call: OpenCall) throws -> [UInt8] {
        try checkNonce(nonce.count)
        guard ciphertext.count >= Self.tagByteCount else { throw CryptoError.messageTooShort }
        let outputCount = ciphertext.count - Self.tagByteCount
        // Allocated uninitialized (libsodium writes every byte it reports; a zero fill and a trim after cost ~100
        // instructions of each received frame) by `ByteArrays.make`, at least one byte so an empty plaintext has a
        // valid pointer. On a failure nothing counts as initialized.
        var rc: Int32 = -1
        let plaintext = ByteArrays.make(capacity: Swift.max(outputCount, 1)) { out in
            var written: UInt64 = 0
            rc = withSodiumInput(ciphertext) { c, cCount in
                withSodiumInput(ad) { a, aCount in
                    withSodiumInput(nonce) { npub, _ in
                        // Why unsafe: `out` has room for ciphertext - ABYTES, the most libsodium writes.
                        call(UnsafeMutableRawBufferPointer(out).sodiumOutput, &written, c, UInt64(cCount),
                             a, UInt64(aCount), npub)
                    }
                }
            }
            return rc == 0 ? Swift.min(Int(clamping: written), outputCount) : 0
        }
        try Sodium.check(rc, orThrow: .authenticationFailure)
        return plaintext
    }

    private func checkNonce(_ count: Int) throws {
        guard count == Self.nonceByteCount else {
            throw CryptoError.invalidLength(what: "\(name) nonce", expected: Self.nonceByteCount, actual: count)
        }
    }
}
