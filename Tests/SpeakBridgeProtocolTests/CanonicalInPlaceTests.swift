import Testing
@testable import SpeakBridgeProtocol

/// The canonical chunk decoder reads the frame in place (a borrowed buffer): strings with escapes, multi-byte
/// UTF-8, broken UTF-8, truncation at every byte, and the ledger's no-copy path for all-new chunks.
@Suite("Chunk messages read in place")
struct CanonicalInPlaceTests {
    static let texts = [
        "plain words", "", "quote \" and backslash \\ inside", "tab\tnewline\n", "\u{1}\u{7F}\u{85}\u{202E}",
        "é ü ß 日本語 🎙️ 👩‍👩‍👧", "surrogate pair 𝄞 and \u{FFFD}", String(repeating: "x", count: 16_384),
    ]

    @Test("texts with escapes and multi-byte UTF-8 take the canonical path and match the general parser")
    func escapesAndUnicode() throws {
        for (i, text) in Self.texts.enumerated() {
            let one = MessageCodec.encode(.chunk(session: "s-1", Chunk(seq: UInt64(i) + 1, text: text, final: i % 2 == 0)))
            let fast = try #require(MessageCodec.decodeCanonical(one), "\(text.prefix(40))")
            #expect(try MessageCodec.decodeGeneral(one) == fast)
            #expect(fast == .chunk(session: "s-1", Chunk(seq: UInt64(i) + 1, text: text, final: i % 2 == 0)))
        }
        let batch = Self.texts.enumerated().map { Chunk(seq: 7 + UInt64($0), text: $1, final: false) }
        let bytes = MessageCodec.encode(.chunks(session: "abc._-XYZ", batch))
        #expect(MessageCodec.decodeCanonical(bytes) == .chunks(session: "abc._-XYZ", batch))
    }

    @Test("every prefix of a canonical message is refused by the canonical path, and the general parser agrees")
    func truncations() throws {
        let batch = [Chunk(seq: 41, text: "a \"b\" é"), Chunk(seq: 42, text: "\u{1B}[31m", final: false)]
        let bytes = MessageCodec.encode(.chunks(session: "s-9", batch))
        for end in 0..<bytes.count {
            let cut = Array(bytes[..<end])
            #expect(MessageCodec.decodeCanonical(cut) == nil, "prefix \(end)")
            #expect(throws: MessageError.self) { try MessageCodec.decode(cut) }
        }
    }

    @Test("broken UTF-8 and raw control bytes in a text or session are refused, by both paths")
    func brokenBytes() {
        let head = Array(#"{"type":"chunk","session":"s-1","seq":1,"text":""#.utf8)
        let tail = Array(#"","final":true}"#.utf8)
        for bad: [UInt8] in [[0xC3], [0xFF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x01], [0x0A],
                             [0x5C, 0x75, 0x44, 0x38, 0x30, 0x30], [0x5C, 0x71]] {
            let bytes = head + Array("ok".utf8) + bad + tail
            #expect(MessageCodec.decodeCanonical(bytes) == nil, "\(bad)")
            #expect(throws: MessageError.self) { try MessageCodec.decode(bytes) }
        }
        let session = Array(#"{"type":"chunk","session":"s"#.utf8) + [0xC3, 0xA9] + Array(#"","seq":1,"text":"a","final":true}"#.utf8)
        #expect(MessageCodec.decodeCanonical(session) == nil)
        #expect(throws: MessageError.self) { try MessageCodec.decode(session) }
    }

    @Test("the ledger accepts an all-new message as it is, and still drops a duplicate prefix")
    func ledgerFastPath() {
        var ledger = SessionLedger()
        let first = (1...4).map { Chunk(seq: $0, text: "t\($0)") }
        #expect(ledger.offer(session: "s", chunks: first).accepted == first)
        let overlapping = (3...6).map { Chunk(seq: $0, text: "t\($0)") }
        let offer = ledger.offer(session: "s", chunks: overlapping)
        #expect(offer.accepted.map(\.seq) == [5, 6])
        #expect(offer.duplicates == 2)
        let unordered = [Chunk(seq: 9, text: "a"), Chunk(seq: 8, text: "b"), Chunk(seq: 10, text: "c")]
        #expect(ledger.offer(session: "s", chunks: unordered).accepted.map(\.seq) == [9, 10])
    }

    @Test("a quote, backslash, control or non-ASCII byte at every position of the eight-byte scan: same as the general parser")
    func everyPosition() throws {
        let head = Array(#"{"type":"chunk","session":"s-1","seq":1,"text":""#.utf8)
        let tail = Array(#"","final":true}"#.utf8)
        let inserts: [[UInt8]] = [[0x5C, 0x22], [0x5C, 0x5C], [0x5C, 0x6E], [0x5C, 0x75, 0x30, 0x30, 0x65, 0x39], [0xC3, 0xA9],
                                  [0xE2, 0x80, 0xAE], [0xF0, 0x9F, 0x8E, 0x99], [0x22], [0x01], [0x1F], [0x7F], [0x80], [0xC3],
                                  [0xF8], [0x20], [0x21], [0x23], [0x5B], [0x5D]]
        for length in 0..<20 {
            for at in 0...length {
                for insert in inserts {
                    var text = Array(repeating: UInt8(ascii: "a"), count: length)
                    text.insert(contentsOf: insert, at: at)
                    let bytes = head + text + tail
                    let general = try? MessageCodec.decodeGeneral(bytes)
                    if let fast = MessageCodec.decodeCanonical(bytes) {
                        #expect(general == fast, "\(text)")
                    } else if let general, case .chunk = general {
                        // Accepted only by the general parser: never for these (all canonical apart from the text).
                        Issue.record("canonical path refused \(text), general accepted it")
                    }
                }
            }
        }
    }

    @Test("the writer's eight-byte skip: every special scalar at every position matches the scalar-by-scalar writer")
    func writerEveryPosition() {
        let specials: [String] = ["\"", "\\", "\n", "\r", "\t", "\u{0}", "\u{1F}", "\u{7F}", "\u{85}", "é", "\u{202E}",
                                  "\u{2028}", "😀", " ", "~", "/"]
        for length in 0..<20 {
            for at in 0...length {
                for special in specials {
                    var text = String(repeating: "b", count: length)
                    text.insert(contentsOf: special, at: text.index(text.startIndex, offsetBy: at))
                    let encoded = JSONValue.string(text).encoded()
                    #expect(encoded == JSONStringFastPathTests.oracle(text), "\(text.debugDescription)")
                    #expect(JSONValue.escapedSize(text) == encoded.count - 2)
                }
            }
        }
    }
}
