import SpeakBridgeProtocol

/// How `send` turns its input into chunk texts: one chunk per line, as README's "Delivery" section says.
public enum InputLines {
    /// One line of input (without its LF) as text: a trailing CR (CRLF input) is dropped, invalid UTF-8 becomes
    /// U+FFFD.
    public static func text(_ bytes: ArraySlice<UInt8>) -> String {
        var line = bytes
        if line.last == 0x0D { line = line.dropLast() }
        return String(decoding: line, as: UTF8.self)
    }

    /// Chunk texts for these lines: blank lines are skipped; a line over `limit` bytes of UTF-8 is cut into pieces
    /// of at most `limit` bytes, at character boundaries — or, inside one character longer than `limit` (a letter
    /// with thousands of combining marks), at scalar boundaries. Every piece is non-empty, so this always ends.
    public static func pieces(_ texts: [String], limit: Int = SpeakBridgeProtocol.maxChunkTextBytes) -> [String] {
        precondition(limit >= 4, "a piece must hold any one scalar")
        var pieces: [String] = []
        for text in texts where !text.isEmpty {
            var rest = Substring(text)
            while rest.utf8.count > limit {
                let cut = characterCut(rest, limit: limit)
                if cut > rest.startIndex {
                    pieces.append(String(rest[..<cut]))
                    rest = rest[cut...]
                } else {
                    let scalars = rest.unicodeScalars
                    let at = scalarCut(scalars, limit: limit)
                    pieces.append(String(String.UnicodeScalarView(scalars[..<at])))
                    rest = Substring(scalars[at...])
                }
            }
            pieces.append(String(rest))
        }
        return pieces
    }

    /// The end of the longest run of whole characters from the start that fits `limit` bytes.
    static func characterCut(_ text: Substring, limit: Int) -> Substring.Index {
        var cut = text.startIndex
        var bytes = 0
        for i in text.indices {
            bytes += text[i].utf8.count
            if bytes > limit { break }
            cut = text.index(after: i)
        }
        return cut
    }

    /// The same by scalars (a scalar is at most 4 bytes, so at least one fits).
    static func scalarCut(_ scalars: Substring.UnicodeScalarView, limit: Int) -> Substring.UnicodeScalarView.Index {
        var cut = scalars.startIndex
        var bytes = 0
        for i in scalars.indices {
            bytes += UTF8.width(scalars[i])
            if bytes > limit { break }
            cut = scalars.index(after: i)
        }
        return cut
    }
}
