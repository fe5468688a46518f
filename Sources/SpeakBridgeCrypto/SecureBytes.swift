// Heap storage for secrets: written once at init, never mutated, zeroed with sodium_memzero on deinit.
internal import CSodium

/// An immutable buffer of secret bytes that wipes itself when the last reference goes away.
///
/// `@unchecked Sendable` is sound because the storage is written only inside `init` and read-only afterwards;
/// `deinit` runs once no other reference (and so no other thread) can reach it.
public final class SecureBytes: @unchecked Sendable {
    private let storage: UnsafeMutableRawBufferPointer

    /// Copies `bytes` into wiped-on-release storage. The caller still owns (and should wipe) the source array.
    public convenience init(_ bytes: [UInt8]) {
        self.init(uninitializedCount: bytes.count) { buffer in
            buffer.copyBytes(from: bytes)
        }
    }

    /// `count` bytes from libsodium's CSPRNG.
    public convenience init(count: Int) {
        Sodium.requireAvailable()
        self.init(uninitializedCount: count) { buffer in
            if let base = buffer.baseAddress { randombytes_buf(base, buffer.count) }
        }
    }

    /// Lets `body` fill the storage. If `body` throws, the partially written storage is wiped and freed.
    init(uninitializedCount count: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        precondition(count >= 0, "SecureBytes count must not be negative")
        // Allocate at least one byte so the base address is never nil; `count` still reports the real size.
        let raw = UnsafeMutableRawPointer.allocate(byteCount: Swift.max(count, 1), alignment: 16)
        raw.initializeMemory(as: UInt8.self, repeating: 0, count: Swift.max(count, 1))
        let buffer = UnsafeMutableRawBufferPointer(start: raw, count: count)
        do {
            try body(buffer)
        } catch {
            Self.wipeAndFree(buffer)
            throw error
        }
        storage = buffer
    }

    deinit {
        Self.wipeAndFree(storage)
    }

    private static func wipeAndFree(_ buffer: UnsafeMutableRawBufferPointer) {
        // Why unsafe: sodium_memzero is the only wipe the optimiser may not remove; the pointer is ours alone.
        if let base = buffer.baseAddress {
            sodium_memzero(base, Swift.max(buffer.count, 1))
            base.deallocate()
        }
    }

    public var count: Int { storage.count }

    /// Read-only access to the secret. Do not let the pointer escape `body`.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(storage))
    }

    /// Equal length and equal bytes, compared in time that depends only on the length.
    public func constantTimeEquals(_ other: SecureBytes) -> Bool {
        guard count == other.count else { return false }
        guard count > 0 else { return true }
        return withUnsafeBytes { left in
            other.withUnsafeBytes { right in
                // Why unsafe: both buffers are `count` bytes long, checked above.
                sodium_memcmp(left.baseAddress, right.baseAddress, count) == 0
            }
        }
    }

    /// A plain copy of the secret; the caller becomes responsible for wiping it.
    public func copyBytes() -> [UInt8] {
        [UInt8](UnsafeRawBufferPointer(storage))
    }
}

extension Array where Element == UInt8 {
    /// Best-effort wipe of a temporary array holding secret bytes (only this array's buffer; earlier copies,
    /// if any were made by copy-on-write, are out of reach).
    public mutating func wipe() {
        withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { sodium_memzero(base, buffer.count) }
        }
        removeAll()
    }
}
