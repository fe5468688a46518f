// SHA-256, HMAC-SHA-256 (any key length) and HKDF-SHA-256 (RFC 5869), all on libsodium.
// libsodium 1.0.18 has no crypto_kdf_hkdf_*, so HKDF is built on crypto_auth_hmacsha256_init/update/final.
internal import CSodium

public enum SHA256 {
    /// Digest size in bytes (Noise HASHLEN).
    public static let byteCount = 32
    /// Input block size in bytes (Noise BLOCKLEN).
    public static let blockByteCount = 64

    public static func hash(_ data: [UInt8]) -> [UInt8] {
        Sodium.requireAvailable()
        return [UInt8](unsafeUninitializedCapacity: byteCount) { out, initialized in
            withSodiumInput(data) { input, inputCount in
                // Why unsafe: libsodium writes exactly crypto_hash_sha256_BYTES (32) into `out`.
                _ = crypto_hash_sha256(UnsafeMutableRawBufferPointer(out).sodiumOutput, input, UInt64(inputCount))
            }
            initialized = byteCount
        }
    }
}

public enum HMACSHA256 {
    /// Tag size in bytes.
    public static let byteCount = 32

    /// HMAC-SHA-256 with a key of any length (RFC 2104). libsodium's one-shot form only takes 32-byte keys,
    /// so this streams through init/update/final.
    public static func authenticate(key: [UInt8], message: [UInt8]) -> [UInt8] {
        Sodium.requireAvailable()
        return [UInt8](unsafeUninitializedCapacity: byteCount) { out, initialized in
            key.withUnsafeBytes { keyBytes in
                message.withUnsafeBytes { messageBytes in
                    let mac = HMACStream(key: keyBytes)
                    mac.update(messageBytes)
                    mac.finalize(into: UnsafeMutableRawBufferPointer(out))
                }
            }
            initialized = byteCount
        }
    }
}

/// A streaming HMAC-SHA-256 whose state (which holds key-derived pads) is wiped when it goes away.
/// The state lives on the heap because a noncopyable struct's `deinit` cannot mutate its own stored properties.
struct HMACStream: ~Copyable {
    private let state: UnsafeMutablePointer<crypto_auth_hmacsha256_state>

    init(key: UnsafeRawBufferPointer) {
        state = .allocate(capacity: 1)
        state.initialize(to: crypto_auth_hmacsha256_state())
        withSodiumInput(key) { keyBytes, keyCount in
            _ = crypto_auth_hmacsha256_init(state, keyBytes, keyCount)
        }
    }

    func update(_ bytes: UnsafeRawBufferPointer) {
        withSodiumInput(bytes) { input, inputCount in
            _ = crypto_auth_hmacsha256_update(state, input, UInt64(inputCount))
        }
    }

    func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Writes the 32-byte tag into `out` (at least `HMACSHA256.byteCount` bytes). Call once, last.
    func finalize(into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count >= HMACSHA256.byteCount, "HMAC output buffer too small")
        _ = crypto_auth_hmacsha256_final(state, out.sodiumOutput)
    }

    deinit {
        // Why unsafe: the state is ours alone; wipe the key-derived pads before freeing it.
        sodium_memzero(state, MemoryLayout<crypto_auth_hmacsha256_state>.size)
        state.deinitialize(count: 1)
        state.deallocate()
    }
}

public enum HKDFSHA256 {
    /// RFC 5869 allows at most 255 blocks of output.
    public static let maxOutputByteCount = 255 * HMACSHA256.byteCount

    /// RFC 5869 HKDF-Extract then HKDF-Expand. An empty salt means HashLen zero bytes, which HMAC's key padding
    /// gives for free. `outputByteCount` must be in 0...8160.
    public static func deriveKey(ikm: [UInt8], salt: [UInt8], info: [UInt8], outputByteCount: Int) -> [UInt8] {
        ikm.withUnsafeBytes { derive(ikm: $0, salt: salt, info: info, outputByteCount: outputByteCount) }
    }

    /// HKDF-SHA256 from a secret key to a secret key (32 bytes): the input and the output stay in wiped storage.
    public static func deriveKey(ikm: SymmetricKey, salt: [UInt8], info: [UInt8]) -> SymmetricKey {
        var okm = ikm.withUnsafeBytes { derive(ikm: $0, salt: salt, info: info, outputByteCount: SymmetricKey.byteCount) }
        defer { okm.wipe() }
        return SymmetricKey(storage: SecureBytes(okm))
    }

    private static func derive(ikm: UnsafeRawBufferPointer, salt: [UInt8], info: [UInt8],
                               outputByteCount: Int) -> [UInt8] {
        precondition((0...maxOutputByteCount).contains(outputByteCount),
                     "HKDF-SHA256 output must be 0...\(maxOutputByteCount) bytes")
        Sodium.requireAvailable()
        // PRK = HMAC-Hash(salt, IKM)
        let prk = SecureBytes(uninitializedCount: HMACSHA256.byteCount) { prkOut in
            salt.withUnsafeBytes { saltBytes in
                let mac = HMACStream(key: saltBytes)
                mac.update(ikm)
                mac.finalize(into: prkOut)
            }
        }
        // T(0) = empty; T(i) = HMAC-Hash(PRK, T(i-1) | info | i); OKM = first L bytes of T(1) | T(2) | ...
        var okm = [UInt8]()
        okm.reserveCapacity(outputByteCount + HMACSHA256.byteCount)
        var previous = [UInt8]()
        var counter: UInt8 = 1
        while okm.count < outputByteCount {
            var block = [UInt8](repeating: 0, count: HMACSHA256.byteCount)
            prk.withUnsafeBytes { prkBytes in
                let mac = HMACStream(key: prkBytes)
                mac.update(previous)
                mac.update(info)
                mac.update([counter])
                block.withUnsafeMutableBytes { mac.finalize(into: $0) }
            }
            okm.append(contentsOf: block)
            previous.wipe()
            previous = block
            block.wipe()
            counter &+= 1
        }
        previous.wipe()
        let result = Array(okm.prefix(outputByteCount))
        okm.wipe()
        return result
    }

    /// Noise's HKDF(chaining_key, input_key_material, num_outputs) (spec §4.3), returning 2 or 3 secrets of
    /// HASHLEN bytes each. It equals RFC 5869 with an empty info, written out the way the spec does:
    ///   temp_key = HMAC-HASH(chaining_key, input_key_material)
    ///   output1  = HMAC-HASH(temp_key, byte(0x01))
    ///   output2  = HMAC-HASH(temp_key, output1 || byte(0x02))
    ///   output3  = HMAC-HASH(temp_key, output2 || byte(0x03))
    static func noiseHKDF(chainingKey: SecureBytes, inputKeyMaterial: SecureBytes, outputs: Int) -> [SecureBytes] {
        precondition(outputs == 2 || outputs == 3, "Noise HKDF yields 2 or 3 outputs")
        let tempKey = SecureBytes(uninitializedCount: HMACSHA256.byteCount) { out in
            chainingKey.withUnsafeBytes { ck in
                inputKeyMaterial.withUnsafeBytes { ikm in
                    let mac = HMACStream(key: ck)
                    mac.update(ikm)
                    mac.finalize(into: out)
                }
            }
        }
        var results: [SecureBytes] = []
        for index in 1...outputs {
            let previous = results.last
            let next = SecureBytes(uninitializedCount: HMACSHA256.byteCount) { out in
                tempKey.withUnsafeBytes { key in
                    let mac = HMACStream(key: key)
                    previous?.withUnsafeBytes { mac.update($0) }
                    mac.update([UInt8(index)])
                    mac.finalize(into: out)
                }
            }
            results.append(next)
        }
        return results
    }
}
