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
        let hay = Array(utf8)
        let pattern = Array(needle.utf8)
        guard !pattern.isEmpty, hay.count >= pattern.count else { return nil }
        for start in 0...(hay.count - pattern.count) where hay[start] == pattern[0] {
            var matched = true
            for offset in 1..<pattern.count where hay[start + offset] != pattern[offset] {
                matched = false
                break
            }
            if matched {
                let lower = utf8.index(utf8.startIndex, offsetBy: start)
                let upper = utf8.index(lower, offsetBy: pattern.count)
                return lower..<upper
            }
        }
        return nil
    }

    /// The parts between occurrences of `separator` (non-empty, ASCII), left to right, without the empty ones:
    /// `split(separator:omittingEmptySubsequences: true)` with a string separator.
    public func splitPlain(separator: String) -> [String] {
        var parts: [String] = []
        var rest = self[...]
        while let range = rest.plainRange(of: separator) {
            if range.lowerBound > rest.startIndex { parts.append(String(rest[..<range.lowerBound])) }
            rest = rest[range.upperBound...]
        }
        if !rest.isEmpty { parts.append(String(rest)) }
        return parts
    }
}
