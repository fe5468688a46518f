import SpeakBridgeClientCore
import SpeakBridgeProtocol
import Testing

@Suite("LineSplitter: send's stdin, read in pieces, as lines")
struct LineSplitterTests {
    /// What splitting the whole input at once gives: every LF ends a line (empty ones too), the rest is a last line.
    static func wholeLines(_ input: [UInt8]) -> [String] {
        var parts = input.split(separator: 0x0A, omittingEmptySubsequences: false).map(InputLines.text)
        if input.last == 0x0A || input.isEmpty { parts.removeLast() }
        return parts
    }

    static func split(_ input: [UInt8], at cuts: [Int]) -> [String] {
        var splitter = LineSplitter()
        var lines: [String] = []
        var start = 0
        for cut in cuts.sorted() + [input.count] where cut >= start {
            lines += splitter.lines(in: input[start..<cut])
            start = cut
        }
        return lines + splitter.finish()
    }

    @Test("whole lines in one piece, lines across pieces, CRLF, empty lines, an unterminated rest")
    func piecesGiveTheLinesOfTheWhole() {
        let input = Array("one\r\ntwo\n\nthree is longer than fifteen bytes\nfo\u{FF}ur\nrest".utf8) + [0xFF, 0x0A, 0x61]
        let expected = Self.wholeLines(input)
        #expect(expected.first == "one" && expected.contains("") && expected.last == "a")
        #expect(Self.split(input, at: []) == expected)
        for cut in 0...input.count {
            #expect(Self.split(input, at: [cut]) == expected, "cut at \(cut)")
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let cuts = (0..<Int.random(in: 1...6, using: &generator)).map { _ in
                Int.random(in: 0...input.count, using: &generator)
            }
            #expect(Self.split(input, at: cuts) == expected, "cuts \(cuts)")
        }
    }

    @Test("a paced line: one piece, one line, nothing kept")
    func oneLine() {
        var splitter = LineSplitter()
        #expect(splitter.lines(in: Array("hello\n".utf8)[...]) == ["hello"])
        #expect(splitter.finish() == [])
        #expect(splitter.lines(in: Array("a\nb".utf8)[...]) == ["a"])
        #expect(splitter.lines(in: Array("c\n".utf8)[...]) == ["bc"])
        #expect(splitter.lines(in: []) == [])
        #expect(splitter.finish() == [])
    }

    @Test("a burst: many lines per piece, pieces cut mid-line (a line's rest joins the kept part, the others come straight)")
    func burstPiecesCutMidLine() {
        var input: [UInt8] = []
        for index in 0..<300 { input += Array("burst line \(index)\(index % 7 == 0 ? "\r" : "")\n".utf8) }
        input += Array("\n\nlast".utf8)
        let expected = Self.wholeLines(input)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            let cuts = (0..<Int.random(in: 1...40, using: &generator)).map { _ in
                Int.random(in: 0...input.count, using: &generator)
            }
            #expect(Self.split(input, at: cuts) == expected, "cuts \(cuts)")
        }
    }

    @Test("a batch: its lines as bytes (LF and a trailing CR dropped); its plain lines are what pieces would keep")
    func batchAsBytes() throws {
        var splitter = LineSplitter()
        let mixed = splitter.batch(in: Array("one\r\n\ntwo words\n\"quoted\"\nrest".utf8)[...])
        #expect(mixed.texts == ["one", "", "two words", "\"quoted\""])
        #expect(mixed.lines.map { Array(mixed.bytes[$0]) } == [Array("one".utf8), [], Array("two words".utf8), Array("\"quoted\"".utf8)])
        #expect(mixed.plainLines == nil)  // the quote: escaped, so the text path
        let plain = splitter.batch(in: Array(" continued\n\n\r\nplain ~ line\n".utf8)[...])
        #expect(plain.texts == ["rest continued", "", "", "plain ~ line"])
        let lines = try #require(plain.plainLines)
        // Blank lines left out, as `InputLines.pieces` leaves them out.
        #expect(lines.ranges.map { String(decoding: lines.bytes[$0], as: UTF8.self) } == InputLines.pieces(plain.texts))
        #expect(splitter.batch(in: Array("no end".utf8)[...]).isEmpty)
        let rest = splitter.finishBatch()
        #expect(rest.texts == ["no end"] && rest.plainLines != nil)
        #expect(splitter.finishBatch().isEmpty)
        for other: [UInt8] in [Array("é\n".utf8), [0xFF, 0x0A], [0x7F, 0x0A], [0x09, 0x0A], Array(repeating: 0x61, count: 16_385) + [0x0A]] {
            #expect(splitter.batch(in: other[...]).plainLines == nil, "\(other.prefix(4))")
        }
        #expect(splitter.batch(in: Array("\n\n".utf8)[...]).plainLines == nil)  // only blank lines: nothing to journal
    }
}

/// The splitter's batches as texts, as `send` makes them when a batch is not plain: what these tests compare.
extension LineSplitter {
    mutating func lines(in bytes: ArraySlice<UInt8>) -> [String] { batch(in: bytes).texts }
    mutating func finish() -> [String] { finishBatch().texts }
}
