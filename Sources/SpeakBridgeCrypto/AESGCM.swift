// AES-256-GCM with a 96-bit nonce, via libsodium's crypto_aead_aes256gcm_* (sealed and opened by `NoiseCipher`
// through `SodiumAEAD`, with the key expanded once per CipherState: `AESGCMKeyState`). libsodium implements it only
// with the AES-NI and CLMUL instructions: `isAvailable` says whether this CPU has them, and every key expansion and
// every per-message call checks it (`ensureAvailable`).
internal import CSodium
#if canImport(Glibc)
import Glibc
#endif

public enum AESGCM {
    /// Key size in bytes.
    public static let keyByteCount = 32
    /// Nonce size in bytes.
    public static let nonceByteCount = SodiumAEAD.nonceByteCount
    /// GHASH tag size in bytes, appended to every ciphertext.
    public static let tagByteCount = SodiumAEAD.tagByteCount

    /// True when libsodium can run AES-256-GCM on this CPU (AES-NI + CLMUL). Without it the browser route, whose
    /// only AEAD is AES-GCM, cannot be offered, and native clients and the desktop speak ChaChaPoly.
    /// `SPEAKBRIDGE_NO_AESGCM` (any value) makes it false, as on a CPU without AES-NI: how tests (and anyone
    /// checking interoperability) run the ChaChaPoly-only side of the cipher choice on a machine that has AES-NI.
    public static let isAvailable: Bool = Sodium.isAvailable && crypto_aead_aes256gcm_is_available() == 1
        && getenv("SPEAKBRIDGE_NO_AESGCM") == nil

    /// Throws unless libsodium can run AES-256-GCM here (without AES-NI its code would not run at all).
    static func ensureAvailable() throws {
        try Sodium.ensureAvailable()
        guard isAvailable else { throw CryptoError.cipherUnavailable("AES-256-GCM (this CPU has no AES-NI)") }
    }
}
