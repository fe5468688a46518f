// Typed keys: a 32-byte symmetric key and X25519 key pairs. Each checks its length in a throwing init.
internal import CSodium

/// A 256-bit secret key (ChaCha20-Poly1305 key, Noise psk), held in self-wiping storage.
public struct SymmetricKey: Sendable {
    /// Size in bytes.
    public static let byteCount = 32

    let storage: SecureBytes

    public init(bytes: [UInt8]) throws {
        guard bytes.count == Self.byteCount else {
            throw CryptoError.invalidLength(what: "symmetric key", expected: Self.byteCount, actual: bytes.count)
        }
        storage = SecureBytes(bytes)
    }

    init(storage: SecureBytes) {
        precondition(storage.count == Self.byteCount, "symmetric key must be 32 bytes")
        self.storage = storage
    }

    /// A key over existing wiped storage (no copy); throws unless it holds exactly `byteCount` bytes.
    public init(secureBytes: SecureBytes) throws {
        guard secureBytes.count == Self.byteCount else {
            throw CryptoError.invalidLength(what: "symmetric key", expected: Self.byteCount, actual: secureBytes.count)
        }
        storage = secureBytes
    }

    /// The key's storage (shared, never copied out).
    public var secureBytes: SecureBytes { storage }

    public static func random() -> SymmetricKey {
        SymmetricKey(storage: SecureBytes(count: byteCount))
    }

    /// Read-only access to the key bytes. Do not let the pointer escape `body`.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes(body)
    }

    /// A plain copy of the key (for storing it); the caller becomes responsible for wiping it.
    public func copyBytes() -> [UInt8] { storage.copyBytes() }
}

extension SymmetricKey: Equatable {
    /// Compares the key bytes in constant time.
    public static func == (lhs: SymmetricKey, rhs: SymmetricKey) -> Bool {
        Sodium.requireAvailable()
        return lhs.withUnsafeBytes { left in
            rhs.withUnsafeBytes { right in
                // Why unsafe: both buffers hold exactly `byteCount` bytes (checked by SymmetricKey's inits).
                left.count == right.count && sodium_memcmp(left.baseAddress, right.baseAddress, left.count) == 0
            }
        }
    }
}

/// An X25519 public key (a Montgomery u-coordinate), exactly 32 bytes.
public struct X25519PublicKey: Sendable, Hashable {
    /// Size in bytes (Noise DHLEN).
    public static let byteCount = 32

    public let rawRepresentation: [UInt8]

    public init(rawRepresentation: [UInt8]) throws {
        guard rawRepresentation.count == Self.byteCount else {
            throw CryptoError.invalidLength(what: "X25519 public key", expected: Self.byteCount,
                                            actual: rawRepresentation.count)
        }
        self.rawRepresentation = rawRepresentation
    }
}

/// An X25519 private key (scalar, clamped by libsodium at use), in self-wiping storage, with its public key.
public struct X25519PrivateKey: Sendable {
    /// Size in bytes.
    public static let byteCount = 32

    private let scalar: SecureBytes
    private let cachedPublicKey: X25519PublicKey

    /// A fresh random key pair.
    public init() {
        let scalar = SecureBytes(count: Self.byteCount)
        do {
            self = try X25519PrivateKey(scalar: scalar)
        } catch {
            // Only reachable if libsodium cannot multiply a random scalar by the base point.
            preconditionFailure("speakbridge: X25519 key generation failed: \(error)")
        }
    }

    public init(rawRepresentation: [UInt8]) throws {
        guard rawRepresentation.count == Self.byteCount else {
            throw CryptoError.invalidLength(what: "X25519 private key", expected: Self.byteCount,
                                            actual: rawRepresentation.count)
        }
        try self.init(scalar: SecureBytes(rawRepresentation))
    }

    private init(scalar: SecureBytes) throws {
        try Sodium.ensureAvailable()
        var publicBytes = [UInt8](repeating: 0, count: X25519PublicKey.byteCount)
        let rc = scalar.withUnsafeBytes { scalarBytes in
            withSodiumInput(scalarBytes) { n, _ in
                publicBytes.withUnsafeMutableBytes { q in
                    // Why unsafe: q and n are exactly crypto_scalarmult_curve25519_BYTES / SCALARBYTES (32) long.
                    crypto_scalarmult_curve25519_base(q.sodiumOutput, n)
                }
            }
        }
        try Sodium.check(rc, orThrow: .weakPublicKey)
        self.scalar = scalar
        self.cachedPublicKey = try X25519PublicKey(rawRepresentation: publicBytes)
    }

    public var publicKey: X25519PublicKey { cachedPublicKey }

    /// A copy of the private scalar; the caller must wipe it.
    public var rawRepresentation: [UInt8] { scalar.copyBytes() }

    /// X25519(self, peer). Throws `.weakPublicKey` when the result is all zeros (peer sent a low-order point),
    /// which libsodium reports as -1; the zero check is repeated here so the rule does not hang on one C detail.
    public func sharedSecret(with peer: X25519PublicKey) throws -> SecureBytes {
        try Sodium.ensureAvailable()
        return try SecureBytes(uninitializedCount: X25519PublicKey.byteCount) { out in
            let rc = scalar.withUnsafeBytes { scalarBytes in
                withSodiumInput(scalarBytes) { n, _ in
                    withSodiumInput(peer.rawRepresentation) { p, _ in
                        // Why unsafe: all three buffers are exactly 32 bytes, checked by the key types' inits.
                        crypto_scalarmult_curve25519(out.sodiumOutput, n, p)
                    }
                }
            }
            try Sodium.check(rc, orThrow: .weakPublicKey)
            let allZero = sodium_is_zero(out.sodiumOutput, out.count) == 1
            if allZero { throw CryptoError.weakPublicKey }
        }
    }
}
