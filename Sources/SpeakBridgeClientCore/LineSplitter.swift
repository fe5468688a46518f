#if canImport(Glibc)
import Glibc
#endif

/// Cuts a byte stream that arrives in pieces (one read(2) each) into lines, keeping an unterminated last line
/// between pieces. Each line is `InputLines.text` of its bytes (without the LF; a trailing CR dropped, invalid
/// UTF-8 as U+FFFD).
public struct LineSplitter: Sendable {
    /// The bytes after the last LF seen.
    var partial: [UInt8] = []

    public init() {}

    /// The lines that `bytes` completes, in order (empty lines included).
    public mutating func lines(in bytes: ArraySlice<UInt8>) -> [String] {
        bytes.withUnsafeBufferPointer { lines(in: $0) }
    }

    /// `lines(in:)` over the piece's memory: LFs found with memchr rather than a byte-at-a-time search.
    mutating func lines(in bytes: UnsafeBufferPointer<UInt8>) -> [String] {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return [] }
        /// The offset of the first LF at or after `from`.
        func lineFeed(from: Int) -> Int? {
            guard from < bytes.count, let hit = memchr(base + from, 0x0A, bytes.count - from) else { return nil }
            return UnsafeRawPointer(base).distance(to: UnsafeRawPointer(hit))
        }
        var lines: [String] = []
        // Room for lines of 32 bytes (a burst's read of 64 KiB grew the array eleven times, ~55 instructions a line).
        lines.reserveCapacity(bytes.count >> 5)
        var start = 0
        if !partial.isEmpty {
            // A line begun in an earlier piece (a burst's reads end mid-line): only its rest, up to this piece's
            // first LF, joins it; the lines after that come straight from the piece below. (It used to copy the
            // whole piece into `partial` and split that with the generic `split`, about 800 instructions a line.)
            guard let end = lineFeed(from: 0) else {
                partial.append(contentsOf: bytes)
                return []
            }
            partial.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[0..<end]))
            lines.append(InputLines.text(partial[...]))
            // Kept for the next cut line, unless one very long line made it big.
            if partial.capacity > 1 << 16 { partial = [] } else { partial.removeAll(keepingCapacity: true) }
            start = end + 1
        }
        // Whole lines straight from the piece (a paced line is one piece), only an unterminated rest kept.
        while let end = lineFeed(from: start) {
            lines.append(Self.text(UnsafeBufferPointer(rebasing: bytes[start..<end])))
            start = end + 1
        }
        if start < bytes.count { partial.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...])) }
        return lines
    }

    /// `InputLines.text` of bytes in memory: a trailing CR dropped, invalid UTF-8 as U+FFFD.
    static func text(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        let line = bytes.last == 0x0D ? UnsafeBufferPointer(rebasing: bytes.dropLast()) : bytes
        return String(decoding: line, as: UTF8.self)
    }

    /// The input ended: the unterminated rest as a last line, if there is one.
    public mutating func finish() -> [String] {
        defer { partial = [] }
        return partial.isEmpty ? [] : [InputLines.text(partial[...])]
    }
}
