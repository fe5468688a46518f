/// Cuts a byte stream that arrives in pieces (one read(2) each) into lines, keeping an unterminated last line
/// between pieces. Each line is `InputLines.text` of its bytes (without the LF; a trailing CR dropped, invalid
/// UTF-8 as U+FFFD).
public struct LineSplitter: Sendable {
    /// The bytes after the last LF seen.
    var partial: [UInt8] = []

    public init() {}

    /// The lines that `bytes` completes, in order (empty lines included).
    public mutating func lines(in bytes: ArraySlice<UInt8>) -> [String] {
        var lines: [String] = []
        var start = bytes.startIndex
        if !partial.isEmpty {
            // A line begun in an earlier piece (a burst's reads end mid-line): only its rest, up to this piece's
            // first LF, joins it; the lines after that come straight from the piece below. (It used to copy the
            // whole piece into `partial` and split that with the generic `split`, about 800 instructions a line.)
            guard let end = bytes.firstIndex(of: 0x0A) else {
                partial += bytes
                return []
            }
            partial += bytes[start..<end]
            lines.append(InputLines.text(partial[...]))
            // Kept for the next cut line, unless one very long line made it big.
            if partial.capacity > 1 << 16 { partial = [] } else { partial.removeAll(keepingCapacity: true) }
            start = end + 1
        }
        // Whole lines straight from the piece (a paced line is one piece), only an unterminated rest kept.
        while let end = bytes[start...].firstIndex(of: 0x0A) {
            lines.append(InputLines.text(bytes[start..<end]))
            start = end + 1
        }
        if start < bytes.endIndex { partial += bytes[start...] }
        return lines
    }

    /// The input ended: the unterminated rest as a last line, if there is one.
    public mutating func finish() -> [String] {
        defer { partial = [] }
        return partial.isEmpty ? [] : [InputLines.text(partial[...])]
    }
}
