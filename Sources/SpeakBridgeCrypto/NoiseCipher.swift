// The two Noise cipher functions SpeakBridge speaks (spec §12.3 ChaChaPoly, §12.4 AESGCM). Browsers, whose WebCrypto
// has AES-GCM but no ChaCha20-Poly1305, use AESGCM; native clients prefer it where the CPU has AES-NI (libsodium's
// AES-256-GCM then costs about a third of ChaCha20-Poly1305's instructions for a line's message), else ChaChaPoly.
// Besides the primitive, the only difference is the nonce: 32 zero bits, then the 64-bit counter little-endian
// (ChaChaPoly) or big-endian (AESGCM). A CipherState keeps what the cipher computes once per key (`expand`):
// AESGCM's key is expanded there, not for every message.

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

    /// What this cipher computes once per key rather than per message: AESGCM's expanded key (`AESGCMKeyState`;
    /// throws if this CPU cannot run AES-GCM); nil for ChaChaPoly, which has no key schedule to keep.
    func expand(_ key: SymmetricKey) throws -> AESGCMKeyState? {
        switch self {
        case .chaChaPoly: nil
        case .aesGCM: try AESGCMKeyState(key: key)
        }
    }

    /// libsodium's functions for this cipher; AES-256-GCM only once the CPU is known to run it (`AESGCM`).
    private func aead() throws -> SodiumAEAD {
        switch self {
        case .chaChaPoly: return .chaCha20Poly1305
        case .aesGCM:
            try AESGCM.ensureAvailable()
            return .aes256GCM
        }
    }

    /// ENCRYPT(k, n, ad, plaintext). With `expanded` (AESGCM: `expand(k)`) the message is sealed with it, k is not
    /// read and not expanded again.
    func seal(key: SymmetricKey, expanded: AESGCMKeyState? = nil, n: UInt64, plaintext: [UInt8],
              ad: [UInt8]) throws -> [UInt8] {
        if let expanded {
            return try withNonce(n) {
                try SodiumAEAD.sealAES256GCM(state: expanded, nonceBytes: $0, plaintext: plaintext, ad: ad)
            }
        }
        let aead = try aead()
        return try withNonce(n) { try aead.seal(key: key, nonceBytes: $0, plaintext: plaintext, ad: ad) }
    }

    /// ENCRYPT(k, n, ad, buffer), written over `buffer` (ChaChaPoly: in place, no new array; AES-GCM, which libsodium
    /// does not document for in-place use, into a new one: `SodiumAEAD.sealInPlace`). Without `expanded`: a
    /// CipherState with an expanded key seals into a new array with `seal`.
    func sealInPlace(key: SymmetricKey, n: UInt64, buffer: inout [UInt8], ad: [UInt8]) throws {
        let aead = try aead()
        try withNonce(n) { try aead.sealInPlace(key: key, nonceBytes: $0, buffer: &buffer, ad: ad) }
    }

    /// DECRYPT(k, n, ad, ciphertext); `expanded` as for `seal`.
    func open(key: SymmetricKey, expanded: AESGCMKeyState? = nil, n: UInt64, ciphertext: [UInt8],
              ad: [UInt8]) throws -> [UInt8] {
        if let expanded {
            return try withNonce(n) {
                try SodiumAEAD.openAES256GCM(state: expanded, nonceBytes: $0, ciphertext: ciphertext, ad: ad)
            }
        }
        let aead = try aead()
        return try withNonce(n) { try aead.open(key: key, nonceBytes: $0, ciphertext: ciphertext, ad: ad) }
    }

    /// `nonceBytes(n)` in a stack buffer, for the duration of `body` (a [UInt8] per message cost an allocation and
    /// a metadata lookup, about 500 instructions of each sealed line).
    func withNonce<R>(_ n: UInt64, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: SodiumAEAD.nonceByteCount) { nonce in
            for i in 0..<4 { nonce[i] = 0 }
            for byteIndex in 0..<8 {
                let shift = UInt64(8 * (self == .chaChaPoly ? byteIndex : 7 - byteIndex))
                nonce[4 + byteIndex] = UInt8(truncatingIfNeeded: n >> shift)
            }
            return try body(UnsafeRawBufferPointer(nonce))
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
