// Randomness and constant-time comparison from libsodium.
internal import CSodium

public enum SecureRandom {
    /// `count` bytes from libsodium's CSPRNG (getrandom(2) on Linux).
    public static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0, "random byte count must not be negative")
        Sodium.requireAvailable()
        return [UInt8](unsafeUninitializedCapacity: count) { out, initialized in
            if let base = out.baseAddress, count > 0 { randombytes_buf(base, count) }
            initialized = count
        }
    }
}

extension SecureRandom {
    /// Fills `buffer` (any size) with CSPRNG output at the cost of one getrandom(2): 32 bytes from
    /// `randombytes_buf` seed libsodium's `randombytes_buf_deterministic` (the ChaCha20 keystream under that seed),
    /// which fills the buffer; the seed is wiped. `randombytes_buf` itself makes one getrandom(2) per 256 bytes.
    /// The output is as unpredictable as the seed (a fresh 256-bit key, used once): for bulk nonces such as
    /// WebSocket masking keys, not for long-term secrets (use `bytes` or `Keys` for those).
    public static func fillKeystream(_ buffer: UnsafeMutableRawBufferPointer) {
        Sodium.requireAvailable()
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Int(randombytes_SEEDBYTES)) { seed in
            randombytes_buf(seed.baseAddress!, seed.count)
            randombytes_buf_deterministic(base, buffer.count, seed.baseAddress!)
            sodium_memzero(seed.baseAddress!, seed.count)
        }
    }
}

/// Compares two byte strings in time that depends only on their length (which is not treated as secret).
public func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    guard !a.isEmpty else { return true }
    Sodium.requireAvailable()
    return a.withUnsafeBytes { left in
        b.withUnsafeBytes { right in
            sodium_memcmp(left.baseAddress, right.baseAddress, left.count) == 0
        }
    }
}
