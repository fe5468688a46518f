import Testing
import SpeakBridgeSinks

@Suite struct OutputSanitizerTests {
    static let table: [(name: String, input: String, expected: String)] = [
        ("clear screen CSI", "\u{1B}[2JHello", "Hello"),
        ("SGR colour in the middle", "red\u{1B}[31;1mtext\u{1B}[0m", "redtext"),
        ("CSI with private parameter", "a\u{1B}[?1049hb", "ab"),
        ("OSC 52 clipboard write, BEL", "x\u{1B}]52;c;ZWNobyBwd25lZA==\u{07}after", "xafter"),
        ("OSC 52 clipboard write, ST", "x\u{1B}]52;c;ZWNobyBwd25lZA==\u{1B}\\after", "xafter"),
        ("OSC 0 title, unterminated", "keep\u{1B}]0;evil title", "keep"),
        ("OSC 8 hyperlink", "\u{1B}]8;;http://example.invalid\u{1B}\\link\u{1B}]8;;\u{1B}\\", "link"),
        ("DCS", "\u{1B}P1$qm\u{1B}\\ok", "ok"),
        ("APC", "\u{1B}_payload\u{1B}\\ok", "ok"),
        ("8-bit CSI U+009B", "\u{9B}31mred", "red"),
        ("8-bit OSC U+009D ended by U+009C", "\u{9D}0;title\u{9C}x", "x"),
        ("8-bit DCS U+0090", "\u{90}q#0\u{9C}y", "y"),
        ("stray C1", "a\u{85}b", "a\u{FFFD}b"),
        ("stray ST", "a\u{9C}b", "a\u{FFFD}b"),
        ("reset terminal ESC c", "\u{1B}cafter", "after"),
        ("charset ESC ( B", "\u{1B}(Bafter", "after"),
        ("save cursor ESC 7", "\u{1B}7after", "after"),
        ("lone ESC at end", "end\u{1B}", "end"),
        ("ESC before non-ASCII", "\u{1B}é", "é"),
        ("OSC interrupted by new CSI", "\u{1B}]0;t\u{1B}[2Jz", "z"),
        ("BEL", "ding\u{07}", "ding\u{FFFD}"),
        ("backspace overwrite", "rm\u{08}\u{08}ls", "rm\u{FFFD}\u{FFFD}ls"),
        ("NUL and DEL", "a\u{00}b\u{7F}c", "a\u{FFFD}b\u{FFFD}c"),
        ("RLO bidi override", "abc\u{202E}fed", "abc\u{FFFD}fed"),
        ("all embedding controls", "\u{202A}\u{202B}\u{202C}\u{202D}", "\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}"),
        ("isolates", "\u{2066}a\u{2067}b\u{2068}c\u{2069}", "\u{FFFD}a\u{FFFD}b\u{FFFD}c\u{FFFD}"),
        ("CRLF", "one\r\ntwo", "one\ntwo"),
        ("lone CR", "one\rtwo", "one\ntwo"),
        ("tab and newline kept", "a\tb\nc", "a\tb\nc"),
        ("ordinary Unicode kept", "Grüße, café, 日本語, 한국어, عربى, emoji 👩‍👩‍👧 🇫🇷, e\u{301}",
         "Grüße, café, 日本語, 한국어, عربى, emoji 👩‍👩‍👧 🇫🇷, e\u{301}"),
        ("LRM/RLM kept", "a\u{200E}b\u{200F}c", "a\u{200E}b\u{200F}c"),
        ("empty", "", ""),
    ]

    @Test(arguments: table.indices)
    func rule(_ index: Int) {
        let row = Self.table[index]
        #expect(OutputSanitizer.sanitize(row.input) == row.expected, "\(row.name)")
    }

    /// Whatever goes in, nothing that drives a terminal comes out.
    @Test func invariantOnPseudoRandomInput() {
        let alphabet: [Unicode.Scalar] = [
            "\u{1B}", "[", "]", "P", "\\", "\u{07}", "\u{9B}", "\u{9C}", "\u{9D}", "\u{90}", "\u{9F}", "\u{85}",
            "\r", "\n", "\t", "\u{00}", "\u{7F}", "\u{202E}", "\u{2066}", "0", ";", "m", "a", "é", "日", "🙂", "(", " ",
        ]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<2000 {
            var scalars = String.UnicodeScalarView()
            for _ in 0..<40 {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                scalars.append(alphabet[Int(state % UInt64(alphabet.count))])
            }
            let output = OutputSanitizer.sanitize(String(scalars))
            for scalar in output.unicodeScalars {
                let v = scalar.value
                let forbidden = (v < 0x20 && v != 0x09 && v != 0x0A) || (0x7F...0x9F).contains(v)
                    || (0x202A...0x202E).contains(v) || (0x2066...0x2069).contains(v)
                #expect(!forbidden, "U+\(String(v, radix: 16)) survived in \(output.debugDescription)")
            }
        }
    }
}
