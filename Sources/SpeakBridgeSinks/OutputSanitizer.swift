/// Makes a peer's text safe to show on a terminal or in an editor.
///
/// A paired phone is trusted to send dictation, not to drive the user's terminal: escape sequences could clear the
/// screen, retitle the window, write the clipboard (OSC 52), fake a prompt or hide text. Rules, applied per Unicode
/// scalar, left to right:
///
/// 1. **Escape sequences are dropped whole**, introducer, parameters and terminator:
///    - CSI: `ESC [` or U+009B, then parameter bytes 0x30–0x3F, intermediate bytes 0x20–0x2F and one final byte
///      0x40–0x7E. A scalar outside those ranges ends the sequence early and is then handled on its own.
///    - Control strings: OSC (`ESC ]`, U+009D), DCS (`ESC P`, U+0090), SOS (`ESC X`, U+0098), PM (`ESC ^`,
///      U+009E), APC (`ESC _`, U+009F). Their content is dropped up to and including BEL, ST (`ESC \` or
///      U+009C), or another ESC (which then starts a new sequence). **An unterminated control string drops the
///      rest of the text**: a terminal would swallow it too, and keeping it would reveal payload such as an
///      OSC 52 clipboard write.
///    - Other escapes: `ESC`, any intermediates 0x20–0x2F, and one final byte 0x30–0x7E (`ESC c`, `ESC 7`, `ESC (B`).
///    - An ESC followed by anything else (end of text, a control, a non-ASCII scalar) is dropped alone.
/// 2. **Line breaks**: `\n` and `\t` are kept. `\r\n` becomes `\n` and a lone `\r` becomes `\n`: a bare carriage
///    return would let later text overwrite earlier text on a terminal line, while the peer most likely meant a
///    line break (old Mac or network line endings).
/// 3. **Other controls become U+FFFD** (the replacement character, visible): C0 0x00–0x1F except `\t` and `\n`
///    (so BEL, BS, NUL…), DEL 0x7F, and C1 U+0080–U+009F not consumed by rule 1 (including a stray ST U+009C).
/// 4. **Bidi embedding, override and isolate controls become U+FFFD**: U+202A–U+202E (LRE, RLE, PDF, LRO, RLO) and
///    U+2066–U+2069 (LRI, RLI, FSI, PDI); they can reorder what is displayed ("Trojan Source"). The implicit marks
///    U+200E/U+200F (LRM/RLM) are kept: they cannot reorder text beyond a neutral character and real
///    right-to-left dictation uses them.
/// 5. Everything else, including accents, combining marks, CJK, emoji and ZWJ sequences, is kept unchanged.
///
/// Invariant (tested): the output contains no ESC, no C0 other than `\t` and `\n`, no DEL, no C1 and none of the
/// bidi controls above.
public enum OutputSanitizer {
    private static let replacement = Unicode.Scalar(0xFFFD)!

    /// Applies the rules above to `text`.
    public static func sanitize(_ text: String) -> String {
        // Fast path, the common case: nothing to change. A byte scan finds every scalar the rules act on:
        // C0 and DEL (< 0x20 except \t \n, 0x7F), C1 (U+0080–U+009F = C2 80–9F) and the bidi controls
        // (U+202A–U+202E = E2 80 AA–AE, U+2066–U+2069 = E2 81 A6–A9).
        if !needsWork(text) { return text }
        let input = Array(text.unicodeScalars)
        var output = String.UnicodeScalarView()
        var i = 0
        while i < input.count {
            let scalar = input[i]
            switch scalar.value {
            case 0x1B:
                i = skipEscape(input, from: i + 1)
            case 0x9B:
                i = skipCSI(input, from: i + 1)
            case 0x90, 0x98, 0x9D, 0x9E, 0x9F:
                i = skipControlString(input, from: i + 1)
            case 0x09, 0x0A:
                output.append(scalar)
                i += 1
            case 0x0D:
                output.append("\n")
                i += (i + 1 < input.count && input[i + 1] == "\n") ? 2 : 1
            case 0x00...0x1F, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069:
                output.append(replacement)
                i += 1
            default:
                output.append(scalar)
                i += 1
            }
        }
        return String(output)
    }

    static func needsWork(_ text: String) -> Bool {
        // Fast path: printable ASCII (and tab, newline) needs nothing; the scan below looks at byte pairs.
        var copy = text
        let plainASCII = copy.withUTF8 { bytes in
            bytes.allSatisfy { ($0 >= 0x20 && $0 < 0x7F) || $0 == 0x09 || $0 == 0x0A }
        }
        if plainASCII { return false }
        var utf8 = text.utf8.makeIterator()
        var previous: UInt8 = 0
        var beforePrevious: UInt8 = 0
        while let byte = utf8.next() {
            switch byte {
            case 0x09, 0x0A: break
            case 0x00...0x1F, 0x7F: return true
            case 0x80...0x9F where previous == 0xC2: return true
            case 0xAA...0xAE where previous == 0x80 && beforePrevious == 0xE2: return true
            case 0xA6...0xA9 where previous == 0x81 && beforePrevious == 0xE2: return true
            default: break
            }
            beforePrevious = previous
            previous = byte
        }
        return false
    }

    /// `start` is just after an ESC; returns the index after the sequence it introduces.
    private static func skipEscape(_ s: [Unicode.Scalar], from start: Int) -> Int {
        guard start < s.count else { return start }
        switch s[start].value {
        case 0x5B: // [
            return skipCSI(s, from: start + 1)
        case 0x5D, 0x50, 0x58, 0x5E, 0x5F: // ] P X ^ _
            return skipControlString(s, from: start + 1)
        case 0x20...0x2F:
            var i = start
            while i < s.count, (0x20...0x2F).contains(s[i].value) { i += 1 }
            if i < s.count, (0x30...0x7E).contains(s[i].value) { i += 1 }
            return i
        case 0x30...0x7E:
            return start + 1
        default:
            return start // drop the ESC alone; the next scalar is handled on its own
        }
    }

    /// `start` is just after a CSI introducer; returns the index after the final byte (or where the sequence broke).
    private static func skipCSI(_ s: [Unicode.Scalar], from start: Int) -> Int {
        var i = start
        while i < s.count, (0x30...0x3F).contains(s[i].value) { i += 1 }
        while i < s.count, (0x20...0x2F).contains(s[i].value) { i += 1 }
        if i < s.count, (0x40...0x7E).contains(s[i].value) { i += 1 }
        return i
    }

    /// `start` is just after an OSC/DCS/SOS/PM/APC introducer; returns the index after its terminator, the index of
    /// an ESC that interrupts it, or the end of the text.
    private static func skipControlString(_ s: [Unicode.Scalar], from start: Int) -> Int {
        var i = start
        while i < s.count {
            switch s[i].value {
            case 0x07, 0x9C:
                return i + 1
            case 0x1B:
                if i + 1 < s.count, s[i + 1] == "\\" { return i + 2 }
                return i
            default:
                i += 1
            }
        }
        return i
    }
}
