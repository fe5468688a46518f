// An AES-256-GCM key expanded once: libsodium's precomputed state (the AES round keys and the GHASH key H), made
// by `crypto_aead_aes256gcm_beforenm` and used by the `_afternm` functions. `crypto_aead_aes256gcm_encrypt` and
// `_decrypt` redo that expansion for every message and then wipe it; a Noise CipherState's key is fixed for all
// its messages, so a CipherState keeps one of these (`NoiseCipher.expand`).
internal import CSodium

/// The precomputed AES-256-GCM state of one key: secret key material, like the key itself (never copied out or
/// printed, zeroed with `sodium_memzero` when the last reference goes away).
///
/// `@unchecked Sendable` is sound because the state is written only inside `init` (by `beforenm`) and read-only
/// afterwards: the `_afternm` functions take it as `const crypto_aead_aes256gcm_state *` and keep no per-call
/// data in it, so any number of threads may use it at once. Copies of a CipherState (a struct) share it safely;
/// the nonce, the only thing that changes per message, lives in the CipherState. `deinit` runs once no other
/// reference (and so no other thread) can reach it.
final class AESGCMKeyState: @unchecked Sendable {
    private let state: UnsafeMutablePointer<crypto_aead_aes256gcm_state>

    /// Bytes of libsodium's state (512 in 1.0.18), which must be 16-byte aligned (`CRYPTO_ALIGN(16)`).
    private static let byteCount = crypto_aead_aes256gcm_statebytes()
    private static let alignment = Swift.max(16, MemoryLayout<crypto_aead_aes256gcm_state>.alignment)

    /// Expands `key`. Throws unless this CPU runs libsodium's AES-256-GCM (without AES-NI, `beforenm` would not
    /// run at all).
    init(key: SymmetricKey) throws {
        try AESGCM.ensureAvailable()
        precondition(Self.byteCount >= MemoryLayout<crypto_aead_aes256gcm_state>.size,
                     "libsodium's AES-GCM state is larger than its header says")
        // Plain heap memory with 16-byte alignment rather than sodium_malloc: sodium_malloc maps guard pages and
        // mprotects them (several system calls and at least three pages per key), and a session makes a state
        // per key (two transport keys, and a few handshake keys that each seal one payload). The state gets the
        // same care as SecureBytes gives the key: written once, zeroed before it is freed.
        let raw = UnsafeMutableRawPointer.allocate(byteCount: Self.byteCount, alignment: Self.alignment)
        raw.initializeMemory(as: UInt8.self, repeating: 0, count: Self.byteCount)
        state = raw.bindMemory(to: crypto_aead_aes256gcm_state.self, capacity: 1)
        let rc = key.storage.withUnsafeBytes { keyBytes in
            withSodiumInput(keyBytes) { k, _ in
                // Why unsafe: `state` is this object's own aligned, statebytes()-sized buffer; k is 32 bytes.
                crypto_aead_aes256gcm_beforenm(state, k)
            }
        }
        guard rc == 0 else {
            Self.wipeAndFree(state)
            throw CryptoError.cipherUnavailable("AES-256-GCM (libsodium could not expand the key)")
        }
    }

    deinit {
        Self.wipeAndFree(state)
    }

    private static func wipeAndFree(_ state: UnsafeMutablePointer<crypto_aead_aes256gcm_state>) {
        // Why unsafe: sodium_memzero is the only wipe the optimiser may not remove; the buffer is ours alone.
        sodium_memzero(state, byteCount)
        UnsafeMutableRawPointer(state).deallocate()
    }

    /// Read-only access to the state for libsodium's `_afternm` functions. Do not let the pointer escape `body`.
    func withUnsafeState<R>(_ body: (UnsafePointer<crypto_aead_aes256gcm_state>) throws -> R) rethrows -> R {
        try body(state)
    }
}
