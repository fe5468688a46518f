#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeProtocol

/// Cuts a byte stream that arrives in pieces (one read(2) each) into lines, keeping an unterminated last line
/// between pieces. Each line is its bytes without the LF and a trailing CR (`InputBatch`); as text, invalid UTF-8
/// becomes U+FFFD (`InputLines.text`).
public struct LineSplitter: Sendable {
    /// The bytes after the last LF seen.
    var partial: [UInt8] = []

    public init() {}

    /// The lines that `bytes` completes, in order (empty lines included), without a `String` made for any of them
    /// (`InputBatch.texts` makes them).
    public mutating func batch(in bytes: ArraySlice<UInt8>) -> InputBatch {
        bytes.withUnsafeBufferPointer { batch(in: $0) }
    }

    /// `batch(in:)` over the piece's memory: LFs found with memchr rather than a byte-at-a-time search. The
    /// batch's bytes are one copy of what it needs (the line begun in an earlier piece, then the piece up to its
    /// last LF), its lines ranges of that copy.
    mutating func batch(in bytes: UnsafeBufferPointer<UInt8>) -> InputBatch {
        // The last LF, from the end (a read ends at one, but for a burst's cut line).
        var last = bytes.count - 1
        while last >= 0 && bytes[last] != 0x0A { last -= 1 }
        guard last >= 0 else {
            partial.append(contentsOf: bytes)
            return InputBatch()
        }
        let through = last + 1  // the last LF included
        var storage: [UInt8]
        if partial.isEmpty {
            storage = Array(UnsafeBufferPointer(rebasing: bytes[..<through]))
        } else {
            // A line begun in an earlier piece (a burst's reads end mid-line) joins this piece's first line.
            storage = partial
            storage.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[..<through]))
            // Kept for the next cut line, unless one very long line made it big.
            if partial.capacity > 1 << 16 { partial = [] } else { partial.removeAll(keepingCapacity: true) }
        }
        if through < bytes.count { partial.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[through...])) }
        var lines: [Range<Int>] = []
        // Room for lines of 32 bytes (a burst's read of 64 KiB grew the array eleven times, ~55 instructions a line).
        lines.reserveCapacity(storage.count >> 5 + 1)
        storage.withUnsafeBufferPointer { buffer in
            guard let start = buffer.baseAddress else { return }
            var from = 0
            // Every LF of `storage` ends a line; the last byte is one.
            while from < buffer.count, let hit = memchr(start + from, 0x0A, buffer.count - from) {
                let lineFeed = UnsafeRawPointer(start).distance(to: UnsafeRawPointer(hit))
                // A trailing CR (CRLF input) is not part of the line.
                let end = lineFeed > from && buffer[lineFeed - 1] == 0x0D ? lineFeed - 1 : lineFeed
                lines.append(from..<end)
                from = lineFeed + 1
            }
        }
        return InputBatch(unchecked: storage, lines)
    }

    /// The input ended: the unterminated rest as a last line, if there is one.
    public mutating func finishBatch() -> InputBatch {
        defer { partial = [] }
        guard !partial.isEmpty else { return InputBatch() }
        return InputBatch(unchecked: partial, [0..<(partial.last == 0x0D ? partial.count - 1 : partial.count)])
    }
}

/// The lines one piece of input completed, as bytes: `bytes` holds them, each line a range of it (without its LF
/// and a trailing CR). `send` journals and frames plain lines straight from these bytes (`plainLines`); any
/// other batch goes the way of texts (`texts`, then `InputLines.pieces`).
public struct InputBatch: Sendable {
    public let bytes: [UInt8]
    public let lines: [Range<Int>]

    public init(bytes: [UInt8] = [], lines: [Range<Int>] = []) {
        precondition(lines.allSatisfy { $0.lowerBound >= 0 && $0.upperBound <= bytes.count }, "lines inside the bytes")
        self.init(unchecked: bytes, lines)
    }

    /// For `LineSplitter`, whose ranges come from the bytes themselves (no pass over them to check that again).
    init(unchecked bytes: [UInt8], _ lines: [Range<Int>]) {
        self.bytes = bytes
        self.lines = lines
    }

    public var isEmpty: Bool { lines.isEmpty }

    /// Each line as `InputLines.text` makes it (invalid UTF-8 as U+FFFD), blank lines included.
    public var texts: [String] {
        bytes.withUnsafeBufferPointer { buffer in
            lines.map { String(decoding: UnsafeBufferPointer(rebasing: buffer[$0]), as: UTF8.self) }
        }
    }

    /// The batch's lines without the blank ones (which `InputLines.pieces` skips too), when every one of them is
    /// plain and within the limits (`PlainLines`: then `InputLines.pieces` would return their texts as they are);
    /// nil otherwise, and when no line is left.
    package var plainLines: PlainLines? {
        PlainLines.make(bytes: bytes, ranges: lines.contains(where: { $0.isEmpty }) ? lines.filter { !$0.isEmpty } : lines)
    }
}
