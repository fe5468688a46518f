/// The one rule for showing text a peer chose (a device name, an error message, a message type, anything read
/// from the network or from a file a peer filled) in a log line, on a terminal or in an error message.
///
/// Every character that can move the cursor, start a line, switch a terminal mode or reorder what is displayed
/// is written out visibly instead:
/// - C0 controls U+0000–U+001F (so ESC, BEL, CR, LF, TAB …): `\n`, `\r`, `\t`, else `\x1b`-style;
/// - DEL U+007F: `\x7f`;
/// - C1 controls U+0080–U+009F (8-bit CSI, OSC, DCS, ST, NEL …): `\u{9b}`-style;
/// - bidirectional formatting (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069) and the line and paragraph
///   separators U+2028, U+2029: `\u{202E}`-style.
/// With ESC and the C1 controls escaped no escape sequence (CSI, OSC incl. OSC 52, DCS, APC …) can start, and
/// with LF, CR, NEL and U+2028/9 escaped a peer can never begin a new log line. Everything else passes unchanged,
/// backslashes included, so escaping is idempotent: `escape(escape(s)) == escape(s)`.
public enum PeerText {
    /// True for every scalar `escape` rewrites.
    public static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        let v = scalar.value
        switch v {
        case 0x00...0x1F, 0x7F...0x9F: return true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: return true
        default: return false
        }
    }

    /// `text` with every unsafe scalar written out visibly (see the type's comment).
    public static func escape(_ text: String) -> String {
        // Fast path: most log lines contain nothing to escape.
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            guard needsEscape(scalar) else {
                out.append(scalar)
                continue
            }
            out.append(contentsOf: visible(scalar).unicodeScalars)
        }
        return String(out)
    }

    /// `escape(text)`, cut to at most `limit` scalars of the original (an ellipsis marks the cut).
    public static func escape(_ text: String, limit: Int) -> String {
        let scalars = text.unicodeScalars
        guard scalars.count > limit else { return escape(text) }
        return escape(String(String.UnicodeScalarView(scalars.prefix(max(0, limit))))) + "…"
    }

    /// At most `limit` scalars of `escape(text)`: for peer text kept in a decoded message. Unlike
    /// `escape(_:limit:)` this is idempotent (escaped text needs no more escaping, and a prefix of a prefix is the
    /// same prefix), so a message decoded, encoded and decoded again is unchanged.
    public static func escapedPrefix(_ text: String, limit: Int) -> String {
        String(String.UnicodeScalarView(escape(text).unicodeScalars.prefix(max(0, limit))))
    }

    /// The longest prefix of `text` made of whole scalars that takes at most `maxBytes` bytes of UTF-8: a bound in
    /// bytes, for peer text echoed into a message of bounded size (a `prefix(n)` of a `String` counts grapheme
    /// clusters, and one cluster can be a base and thousands of combining marks). Not escaped.
    public static func utf8Prefix(_ text: String, maxBytes: Int) -> String {
        guard text.utf8.count > maxBytes else { return text }
        var out = String.UnicodeScalarView()
        var used = 0
        for scalar in text.unicodeScalars {
            let size = UTF8.width(scalar)
            guard used + size <= maxBytes else { break }
            out.append(scalar)
            used += size
        }
        return String(out)
    }

    static func visible(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16)
        switch scalar.value {
        case 0x0A: return "\\n"
        case 0x0D: return "\\r"
        case 0x09: return "\\t"
        case 0x00...0x7F: return "\\x" + (hex.count < 2 ? "0" + hex : hex)
        default: return "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        }
    }
}
