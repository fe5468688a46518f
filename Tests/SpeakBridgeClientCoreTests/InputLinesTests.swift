import SpeakBridgeClientCore
import SpeakBridgeProtocol
import Testing

@Suite("InputLines: send's input as chunk texts")
struct InputLinesTests {
    @Test("CRLF, blank lines, invalid UTF-8")
    func lines() {
        #expect(InputLines.text(Array("abc\r".utf8)[...]) == "abc")
        #expect(InputLines.text([0x61, 0xFF][...]) == "a\u{FFFD}")
        #expect(InputLines.pieces(["", "a", "", "b"]) == ["a", "b"])
    }

    @Test("lines that need no cut come back as they are, a long one among them is still cut")
    func fittingLines() {
        let fitting = ["a", "two words", String(repeating: "\u{1}", count: 40), "é"]
        #expect(InputLines.pieces(fitting) == fitting)
        let long = String(repeating: "x", count: 20)
        #expect(InputLines.pieces(["a", long], limit: 8, escapedLimit: 48) == ["a", "xxxxxxxx", "xxxxxxxx", "xxxx"])
    }

    @Test("a long line is cut at character boundaries into pieces of at most the limit")
    func longLine() {
        let line = String(repeating: "é", count: 10)  // 2 bytes each
        let pieces = InputLines.pieces([line], limit: 5)
        #expect(pieces == ["éé", "éé", "éé", "éé", "éé"])
        let big = String(repeating: "x", count: SpeakBridgeProtocol.maxChunkTextBytes * 2 + 1)
        #expect(InputLines.pieces([big]).map(\.utf8.count)
                == [SpeakBridgeProtocol.maxChunkTextBytes, SpeakBridgeProtocol.maxChunkTextBytes, 1])
    }

    @Test("one character longer than the limit (a letter with 20,000 combining marks) is cut between scalars")
    func hugeCharacter() {
        let zalgo = "a" + String(repeating: "\u{0301}", count: 20_000) + "b"  // one Character of 40,001 bytes, then b
        let pieces = InputLines.pieces([zalgo])
        #expect(pieces.allSatisfy { !$0.isEmpty && $0.utf8.count <= SpeakBridgeProtocol.maxChunkTextBytes })
        #expect(pieces.joined() == zalgo)
        #expect(pieces.count == 3)
    }

    // MARK: - Pieces by encoded size (a chunk must fit one frame once written as JSON)

    /// The largest `chunk` message a piece can be sent in: a 64-byte session ID and the largest seq.
    static func frame(_ piece: String) -> Int {
        let session = String(repeating: "s", count: 64)
        return MessageCodec.encode(.chunk(session: session, Chunk(seq: 1 << 53, text: piece))).count + 16
    }

    static func expectFit(_ line: String, pieces: [String]) {
        #expect(pieces.joined() == line)
        #expect(pieces.allSatisfy { !$0.isEmpty })
        for piece in pieces {
            #expect(piece.utf8.count <= SpeakBridgeProtocol.maxChunkTextBytes)
            #expect(JSONValue.escapedSize(piece) <= OutboxWindow.maxEscapedTextBytes)
            #expect(frame(piece) <= SpeakBridgeProtocol.maxFrameSize, "a piece of \(piece.utf8.count) bytes")
        }
    }

    @Test("the escaped budget is what a lone chunk may take in a frame, with room for the envelope")
    func budgetFitsAFrame() {
        let largest = String(repeating: "\u{1}", count: OutboxWindow.maxEscapedTextBytes / 6)
            + String(repeating: "x", count: OutboxWindow.maxEscapedTextBytes % 6)
        #expect(OutboxWindow.maxEscapedTextBytes == 64_318)  // the number PROTOCOL.md gives
        #expect(JSONValue.escapedSize(largest) == OutboxWindow.maxEscapedTextBytes)
        #expect(Self.frame(largest) <= SpeakBridgeProtocol.maxFrameSize)
        #expect(Self.frame(largest) > SpeakBridgeProtocol.maxFrameSize - 1_200, "the budget wastes most of a frame")
    }

    @Test("16,384 C0 controls or DELs (6 bytes each as \\u00XX) are cut so that every piece fits a frame")
    func controls() {
        for scalar in ["\u{1}", "\u{1B}", "\u{7F}"] {
            let line = String(repeating: scalar, count: SpeakBridgeProtocol.maxChunkTextBytes)
            let pieces = InputLines.pieces([line])
            Self.expectFit(line, pieces: pieces)
            #expect(pieces.count == 2)  // 98,304 escaped bytes: two pieces, cut as late as the budget allows
            #expect(JSONValue.escapedSize(pieces[0]) > OutboxWindow.maxEscapedTextBytes - 6)
        }
    }

    @Test("C1 and bidi controls, quotes and backslashes: long lines fit a frame")
    func otherEscapes() {
        for scalar in ["\u{85}", "\u{9B}", "\u{202E}", "\u{2028}", "\"", "\\", "\"\\"] {
            let line = String(repeating: scalar, count: 40_000)
            Self.expectFit(line, pieces: InputLines.pieces([line]))
        }
    }

    @Test("mixed text, mostly controls, with quotes, accents and emoji, then a normal line")
    func mixed() {
        // 81 bytes of UTF-8, 331 escaped: a 16 KiB piece of this took over 64 KiB in a frame.
        let unit = String(repeating: "\u{1}", count: 48) + "a\"\\é\u{85}😀👨‍👩‍👧\u{202E}\t"
        let line = String(repeating: unit, count: 1_000)
        let pieces = InputLines.pieces([line, "after"])
        #expect(pieces.last == "after")
        Self.expectFit(line, pieces: Array(pieces.dropLast()))
        // Cut at character boundaries: the family emoji (one character of 18 bytes) is never split.
        #expect(pieces.dropLast().map(\.count).reduce(0, +) == line.count)
    }

    @Test("the escaped limit cuts by escaped size, at character boundaries")
    func escapedLimitRule() {
        #expect(InputLines.pieces(["\u{1}\u{1}\u{1}"], limit: 100, escapedLimit: 12) == ["\u{1}\u{1}", "\u{1}"])
        #expect(InputLines.pieces([String(repeating: "\"", count: 4)], limit: 100, escapedLimit: 6)
                == [String(repeating: "\"", count: 3), "\""])
        #expect(InputLines.pieces(["😀😀😀"], limit: 100, escapedLimit: 8) == ["😀😀", "😀"])
        // Two quotes (2 escaped each) and then é as e + U+0301 (3): the cut falls before the cluster, not inside it.
        #expect(InputLines.pieces(["\"\"e\u{301}"], limit: 100, escapedLimit: 6) == ["\"\"", "e\u{301}"])
        // Both limits hold: the byte limit cuts plain text, the escaped limit cuts controls.
        #expect(InputLines.pieces(["abcdef"], limit: 4, escapedLimit: 100) == ["abcd", "ef"])
        #expect(InputLines.pieces(["\u{1}bcdef"], limit: 4, escapedLimit: 8) == ["\u{1}bc", "def"])
    }
}
