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

    /// Chunk texts for these lines: blank lines are skipped; a line too long for one chunk is cut into pieces, each
    /// at most `limit` bytes of UTF-8 (the protocol's text limit) and at most `escapedLimit` bytes once written
    /// as a JSON string (`JSONValue.escapedSize`: a control is 6 bytes, `"` and `\` 2), the size for which the
    /// packer fits that piece, alone, into one frame (`OutboxWindow.maxEscapedTextBytes`). Cuts fall at character
    /// boundaries — or, inside one character longer than a piece (a letter with thousands of combining marks), at
    /// scalar boundaries. Every piece is non-empty, so this always ends.
    public static func pieces(_ texts: [String], limit: Int = SpeakBridgeProtocol.maxChunkTextBytes,
                              escapedLimit: Int = OutboxWindow.maxEscapedTextBytes) -> [String] {
        precondition(limit >= 4 && escapedLimit >= 6, "a piece must hold any one scalar")
        let budget = Budget(bytes: limit, escaped: escapedLimit)
        // The usual input (no blank line, none too long): the texts themselves, no new array.
        if texts.allSatisfy({ !$0.isEmpty && budget.fits(Substring($0)) }) { return texts }
        var pieces: [String] = []
        for text in texts where !text.isEmpty {
            var rest = Substring(text)
            while !budget.fits(rest) {
                let cut = characterCut(rest, budget)
                if cut > rest.startIndex {
                    pieces.append(String(rest[..<cut]))
                    rest = rest[cut...]
                } else {
                    let scalars = rest.unicodeScalars
                    let at = scalarCut(scalars, budget)
                    pieces.append(String(String.UnicodeScalarView(scalars[..<at])))
                    rest = Substring(scalars[at...])
                }
            }
            pieces.append(String(rest))
        }
        return pieces
    }

    /// The two sizes a piece is held to, and how much of them a run of text has used.
    struct Budget {
        let bytes: Int
        let escaped: Int

        func fits(_ text: Substring) -> Bool {
            let count = text.utf8.count
            guard count <= bytes else { return false }
            // Escaping at most sextuples a byte (a 1-byte control becomes \u00XX), so most lines need no count.
            guard count > escaped / 6 else { return true }
            return JSONValue.escapedSize(String(text)) <= escaped
        }

        /// Adds `piece` (a character or a scalar) to the running sizes; false, untouched, if it would exceed either.
        func take(_ piece: String, _ used: inout (bytes: Int, escaped: Int)) -> Bool {
            let next = (bytes: used.bytes + piece.utf8.count, escaped: used.escaped + JSONValue.escapedSize(piece))
            guard next.bytes <= bytes, next.escaped <= escaped else { return false }
            used = next
            return true
        }
    }

    /// The end of the longest run of whole characters from the start that fits the budget (escaping is per
    /// scalar, so a run's escaped size is the sum of its characters').
    static func characterCut(_ text: Substring, _ budget: Budget) -> Substring.Index {
        var cut = text.startIndex
        var used = (bytes: 0, escaped: 0)
        for i in text.indices {
            guard budget.take(String(text[i]), &used) else { break }
            cut = text.index(after: i)
        }
        return cut
    }

    /// The same by scalars (a scalar is at most 4 bytes and 6 escaped, so at least one fits).
    static func scalarCut(_ scalars: Substring.UnicodeScalarView,
                          _ budget: Budget) -> Substring.UnicodeScalarView.Index {
        var cut = scalars.startIndex
        var used = (bytes: 0, escaped: 0)
        for i in scalars.indices {
            guard budget.take(String(Character(scalars[i])), &used) else { break }
            cut = scalars.index(after: i)
        }
        return cut
    }
}
