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
}
