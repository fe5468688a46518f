// Joining, searching and splitting strings by their UTF-8 bytes, for code on the way to a `send`'s first line.
//
// Why not the standard library's `joined(separator:)`, `firstRange(of:)` or `split(separator: "; ")`: on a `[String]`
// the first runs unspecialized generic code, and the other two go through _StringProcessing's substring searcher,
// which builds a `[Character: Int]`. The first use of each in a process makes the Swift runtime instantiate generic
// metadata from mangled names and check its requirements against every protocol-conformance record of the binary
// (about 0.15–0.24 M instructions each; callgrind of a one-shot `send --text`, README → Experiments). These loops
// are specialized at compile time and need no metadata. Byte-wise comparison is what the callers mean: their
// separators and markers are ASCII (a match of an ASCII needle's bytes always falls on Unicode scalar boundaries).

extension Array where Element == String {
    /// The elements joined with `separator` between them, as `joined(separator:)` does.
    public func joinedPlain(separator: String) -> String {
        var out = ""
        for (index, element) in enumerated() {
            if index > 0 { out += separator }
            out += element
        }
        return out
    }
}

extension StringProtocol {
    /// The first range of `needle`'s UTF-8 bytes in these bytes; nil when absent or when `needle` is empty.
    public func plainRange(of needle: String) -> Range<String.Index>? {
        let pattern = Array(needle.utf8)
        guard let start = plainMatch(of: pattern, in: Array(utf8), from: 0) else { return nil }
        let lower = utf8.index(utf8.startIndex, offsetBy: start)
        return lower..<utf8.index(lower, offsetBy: pattern.count)
    }

    /// The parts between occurrences of `separator` (ASCII), left to right, without the empty ones:
    /// `split(separator:omittingEmptySubsequences: true)` with a string separator. One pass over the bytes.
    public func splitPlain(separator: String) -> [String] {
        let bytes = Array(utf8)
        let pattern = Array(separator.utf8)
        var parts: [String] = []
        var from = 0
        func take(_ end: Int) {
            if end > from { parts.append(String(decoding: bytes[from..<end], as: UTF8.self)) }
        }
        while let start = plainMatch(of: pattern, in: bytes, from: from) {
            take(start)
            from = start + pattern.count
        }
        take(bytes.count)
        return parts
    }
}

/// The offset of the first occurrence of `pattern` in `bytes` at or after `from`; nil when none or when `pattern` is
/// empty.
private func plainMatch(of pattern: [UInt8], in bytes: [UInt8], from: Int) -> Int? {
    guard let first = pattern.first, bytes.count - from >= pattern.count else { return nil }
    for start in from...(bytes.count - pattern.count) where bytes[start] == first {
        if bytes[start..<(start + pattern.count)].elementsEqual(pattern) { return start }
    }
    return nil
}
