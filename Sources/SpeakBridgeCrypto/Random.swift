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
