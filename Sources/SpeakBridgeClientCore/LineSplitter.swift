/// Cuts a byte stream that arrives in pieces (one read(2) each) into lines, keeping an unterminated last line
/// between pieces. Each line is `InputLines.text` of its bytes (without the LF; a trailing CR dropped, invalid
/// UTF-8 as U+FFFD).
public struct LineSplitter: Sendable {
    /// The bytes after the last LF seen.
    var partial: [UInt8] = []

    public init() {}

    /// The lines that `bytes` completes, in order (empty lines included).
    public mutating func lines(in bytes: ArraySlice<UInt8>) -> [String] {
        guard partial.isEmpty else {
            partial += bytes
            guard let last = partial.lastIndex(of: 0x0A) else { return [] }
            let lines = partial[..<last].split(separator: 0x0A, omittingEmptySubsequences: false).map(InputLines.text)
            partial.removeFirst(last + 1)
            return lines
        }
        // The usual piece (whole lines, as a paced line comes): lines straight from it, only an unterminated rest
        // kept — the same lines as above, without first copying the piece into `partial`.
        var lines: [String] = []
        var start = bytes.startIndex
        while let end = bytes[start...].firstIndex(of: 0x0A) {
            lines.append(InputLines.text(bytes[start..<end]))
            start = end + 1
        }
        if start < bytes.endIndex { partial = Array(bytes[start...]) }
        return lines
    }

    /// The input ended: the unterminated rest as a last line, if there is one.
    public mutating func finish() -> [String] {
        defer { partial = [] }
        return partial.isEmpty ? [] : [InputLines.text(partial[...])]
    }
}
