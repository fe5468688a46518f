// Noise CipherState (spec §5.1): a key k (or empty) and a 64-bit nonce n, with ChaChaPoly or AESGCM as the cipher.
// For AESGCM, InitializeKey also expands k once (`AESGCMKeyState`), and every message under k uses that.

struct CipherState: Sendable {
    /// Nonce 2^64-1 is reserved (spec §5.1); reaching it ends the session.
    static let maxNonce = UInt64.max

    /// k: 32 bytes or empty. SymmetricKey's storage wipes itself once the last copy is dropped.
    private var k: SymmetricKey?
    /// AESGCM only: k expanded once by InitializeKey (AES-256 round keys, GHASH key), used by every message under k.
    /// Nil for ChaChaPoly and without a key. Wiped like k; copies of a CipherState share it (never written after
    /// InitializeKey). Beside k rather than in one enum with it: copying such an enum cost ~30 instructions per
    /// AESGCM message (callgrind).
    private(set) var expandedK: AESGCMKeyState?
    /// n: the nonce of the next EncryptWithAd/DecryptWithAd.
    private(set) var n: UInt64 = 0
    /// The cipher functions (spec §12.3, §12.4), fixed by the protocol name.
    let cipher: NoiseCipher

    /// InitializeKey(empty).
    init(cipher: NoiseCipher) {
        self.cipher = cipher
    }

    /// InitializeKey(key): Sets k = key. Sets n = 0. For AESGCM the key is expanded here, once; this throws
    /// only if the CPU cannot run AES-GCM (which HandshakeState checks before it makes any CipherState).
    init(key: SymmetricKey, cipher: NoiseCipher) throws {
        k = key
        expandedK = try cipher.expand(key)
        n = 0
        self.cipher = cipher
    }

    /// HasKey(): Returns true if k is non-empty, false otherwise.
    var hasKey: Bool { k != nil }

    /// EncryptWithAd(ad, plaintext): If k is non-empty returns ENCRYPT(k, n++, ad, plaintext).
    /// Otherwise returns plaintext.
    mutating func encryptWithAd(_ ad: [UInt8], _ plaintext: [UInt8]) throws -> [UInt8] {
        guard let k else { return plaintext }
        guard n != Self.maxNonce else { throw CryptoError.nonceExhausted }
        let ciphertext = try cipher.seal(key: k, expanded: expandedK, n: n, plaintext: plaintext, ad: ad)
        n += 1
        return ciphertext
    }

    /// EncryptWithAd over `buffer` itself (it ends as what `encryptWithAd` returns). Without a key it is left as is.
    mutating func encryptWithAd(_ ad: [UInt8], inPlace buffer: inout [UInt8]) throws {
        guard let k else { return }
        guard n != Self.maxNonce else { throw CryptoError.nonceExhausted }
        if let expandedK {
            // AES-GCM seals into a new array (libsodium documents in-place use for ChaCha20-Poly1305 only).
            buffer = try cipher.seal(key: k, expanded: expandedK, n: n, plaintext: buffer, ad: ad)
        } else {
            try cipher.sealInPlace(key: k, n: n, buffer: &buffer, ad: ad)
        }
        n += 1
    }

    /// DecryptWithAd(ad, ciphertext): If k is non-empty returns DECRYPT(k, n++, ad, ciphertext).
    /// Otherwise returns ciphertext. If an authentication failure occurs in DECRYPT() then n is not incremented
    /// and an error is signaled to the caller.
    mutating func decryptWithAd(_ ad: [UInt8], _ ciphertext: [UInt8]) throws -> [UInt8] {
        guard let k else { return ciphertext }
        guard n != Self.maxNonce else { throw CryptoError.nonceExhausted }
        let plaintext = try cipher.open(key: k, expanded: expandedK, n: n, ciphertext: ciphertext, ad: ad)
        n += 1
        return plaintext
    }

    /// Drops the key (its storage, and AESGCM's expanded key, are zeroed when no copy remains).
    mutating func wipe() {
        k = nil
        expandedK = nil
    }
}
