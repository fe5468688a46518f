// One-time libsodium initialisation and the one helper that turns C return codes into typed errors.
internal import CSodium

enum Sodium {
    /// `sodium_init()` returns 0 the first time, 1 when already initialised and -1 on failure.
    /// A `static let` is initialised exactly once, thread-safely, on first use.
    static let isAvailable: Bool = sodium_init() >= 0

    /// For throwing entry points.
    static func ensureAvailable() throws {
        guard isAvailable else { throw CryptoError.sodiumUnavailable }
    }

    /// For entry points whose public signature cannot throw (hashing, randomness). libsodium only fails to
    /// initialise when the system has no usable random source, and then nothing here may continue.
    static func requireAvailable() {
        precondition(isAvailable, "speakbridge: libsodium failed to initialise (no random source?)")
    }

    /// libsodium functions return 0 on success and -1 on failure; map failure to the caller's typed error.
    static func check(_ returnCode: Int32, orThrow error: CryptoError) throws {
        guard returnCode == 0 else { throw error }
    }
}

// libsodium declares its pointer parameters nonnull even where the length may be 0, and Swift may give a nil base
// address for an empty buffer. Every input reaches C through one of these, so an empty input gets a valid pointer.

/// Calls `body` with a nonnull pointer to `bytes` and their count.
func withSodiumInput<R>(_ bytes: [UInt8], _ body: (UnsafePointer<UInt8>, Int) throws -> R) rethrows -> R {
    try bytes.withUnsafeBufferPointer { buffer in
        try withSodiumInput(UnsafeRawBufferPointer(buffer), body)
    }
}

/// Calls `body` with a nonnull typed pointer to `bytes` and their count.
func withSodiumInput<R>(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafePointer<UInt8>, Int) throws -> R) rethrows -> R {
    if let base = bytes.baseAddress {
        // Why unsafe: libsodium reads these bytes as unsigned char; UInt8 has the same layout.
        return try body(base.assumingMemoryBound(to: UInt8.self), bytes.count)
    }
    let placeholder: UInt8 = 0
    return try withUnsafePointer(to: placeholder) { try body($0, 0) }
}

extension UnsafeMutableRawBufferPointer {
    /// The typed base address of an output buffer that the caller allocated non-empty.
    var sodiumOutput: UnsafeMutablePointer<UInt8> {
        guard let base = baseAddress else { preconditionFailure("libsodium output buffer has no storage") }
        return base.assumingMemoryBound(to: UInt8.self)
    }
}
