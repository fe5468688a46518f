// Moving a SymmetricKey in and out of a file with as few plain copies as possible: hex straight into and out of
// self-wiping storage (libsodium's constant-time hex codec), a constant-time comparison, and a wipe for the
// temporary buffers a caller cannot avoid (a file's bytes).
internal import CSodium

extension SymmetricKey {
    /// Parses exactly 64 hex digits (either case) directly into self-wiping storage. Nil for anything else.
    /// The digits are decoded in constant time (`sodium_hex2bin`); no plain copy of the key is made.
    public init?(hex digits: String) {
        var text = digits  // shares the caller's storage: withUTF8 on a native string makes no copy
        let parsed: SecureBytes? = text.withUTF8 { utf8 in
            guard utf8.count == Self.byteCount * 2, let source = utf8.baseAddress else { return nil }
            Sodium.requireAvailable()
            return try? SecureBytes(uninitializedCount: Self.byteCount) { out in
                var written = 0
                // Why unsafe: `out` is exactly byteCount bytes and sodium_hex2bin writes at most bin_maxlen; the
                // source is the string's own UTF-8 buffer, read up to its count.
                let rc = source.withMemoryRebound(to: CChar.self, capacity: utf8.count) { hex in
                    sodium_hex2bin(out.sodiumOutput, out.count, hex, utf8.count, nil, &written, nil)
                }
                guard rc == 0, written == Self.byteCount else { throw CryptoError.invalidLength(
                    what: "symmetric key (hex)", expected: Self.byteCount, actual: written) }
            }
        }
        guard let parsed else { return nil }
        self.init(storage: parsed)
    }

    /// Appends the key as 64 lowercase hex digits to `out`, encoded in constant time straight from the secure
    /// storage. The caller must wipe `out` (`SecretMemory.wipe`) when done; reserve its capacity first so no
    /// reallocation leaves a copy behind.
    public func appendHex(to out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: Self.byteCount * 2 + 1))
        storage.withUnsafeBytes { key in
            out.withUnsafeMutableBytes { buffer in
                // Why unsafe: the 65 bytes from `start` were just appended (64 digits + sodium's NUL); the key
                // buffer is exactly byteCount bytes.
                let target = (buffer.baseAddress! + start).assumingMemoryBound(to: CChar.self)
                _ = sodium_bin2hex(target, Self.byteCount * 2 + 1,
                                   key.baseAddress!.assumingMemoryBound(to: UInt8.self), Self.byteCount)
            }
        }
        out.removeLast()  // sodium's NUL terminator
    }
}

/// Wiping of plain buffers that had to hold secret bytes (the bytes of a file of keys).
public enum SecretMemory {
    /// Zeroes `bytes` with `sodium_memzero` (which the optimiser may not remove) and empties it. Best effort:
    /// copies made earlier by copy-on-write are out of reach.
    public static func wipe(_ bytes: inout [UInt8]) {
        bytes.wipe()
    }
}
