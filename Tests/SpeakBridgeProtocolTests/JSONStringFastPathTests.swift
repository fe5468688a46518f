import Testing
@testable import SpeakBridgeProtocol
import SpeakBridgeSupport

/// The byte-run JSON string writer and parser (hot path of every chunk) against a scalar-by-scalar oracle, and
/// the frame packer's size bound against the real encoding.
@Suite("JSON strings: fast paths match the scalar rules")
struct JSONStringFastPathTests {
    /// The writer as it was before the fast path: one scalar at a time (the oracle).
    static func oracle(_ s: String) -> [UInt8] {
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = [0x22]
        for scalar in s.unicodeScalars {
            let v = scalar.value
            switch v {
            case 0x22: out += [0x5C, 0x22]
            case 0x5C: out += [0x5C, 0x5C]
            case 0x0A: out += [0x5C, UInt8(ascii: "n")]
            case 0x0D: out += [0x5C, UInt8(ascii: "r")]
            case 0x09: out += [0x5C, UInt8(ascii: "t")]
            case 0x20..<0x7F: out.append(UInt8(v))
            case _ where PeerText.needsEscape(scalar):
                out += Array("\\u".utf8)
                for shift in [12, 8, 4, 0] { out.append(hex[Int((v >> UInt32(shift)) & 0xF)]) }
            default: UTF8.encode(scalar) { out.append($0) }
            }
        }
        out.append(0x22)
        return out
    }

    static let samples: [String] = [
        "", "plain words", "quote \" and backslash \\ and / slash", "tab\tline\nreturn\r",
        "\u{0}\u{1}\u{1B}[31m\u{7F}", "C1 \u{80}\u{85}\u{9F} after", "bidi \u{202E}evil\u{202C} \u{2066}x\u{2069} \u{061C}",
        "line sep \u{2028} para \u{2029}", "accents: éèà ß ø", "Cyrillic: привет", "CJK: 你好世界",
        "emoji 👩‍💻🎙️ and flags 🇫🇷", "\u{A0}\u{AD}\u{FEFF}\u{200B}", "mixed \u{1}é\u{85}\"漢\u{2028}\\😀",
    ]

    /// Strings built from scalars around every boundary the writer tests (ASCII, C0, DEL, C1, bidi, BMP, astral).
    static func generated() -> [String] {
        let scalars: [UInt32] = [0x0, 0x9, 0xA, 0x1F, 0x20, 0x22, 0x5C, 0x7E, 0x7F, 0x80, 0x9F, 0xA0, 0x7FF, 0x800,
                                 0x61C, 0x200D, 0x200E, 0x200F, 0x2027, 0x2028, 0x2029, 0x202A, 0x202E, 0x202F,
                                 0x2065, 0x2066, 0x2069, 0x206A, 0xFFFD, 0xFFFF, 0x10000, 0x1F600, 0x10FFFF]
        var generator = SystemRandomNumberGenerator()
        return (0..<300).map { _ in
            var view = String.UnicodeScalarView()
            for _ in 0..<Int.random(in: 0...12, using: &generator) {
                view.append(Unicode.Scalar(scalars.randomElement(using: &generator)!)!)
            }
            return String(view)
        }
    }

    @Test("writeString writes exactly what the scalar-by-scalar writer wrote; escapedSize is its length")
    func writerMatchesOracle() {
        for s in Self.samples + Self.generated() {
            let encoded = JSONValue.string(s).encoded()
            #expect(encoded == Self.oracle(s), "\(Array(s.unicodeScalars.map(\.value)))")
            #expect(JSONValue.escapedSize(s) == encoded.count - 2)
        }
    }

    @Test("parse reads back every written string, with and without escapes")
    func parseRoundTrip() throws {
        for s in Self.samples + Self.generated() {
            let encoded = JSONValue.string(s).encoded()
            #expect(try JSONValue.parse(encoded) == .string(s))
            // The same string inside an object, unescaped where JSON allows it (the fast path of the parser).
            let object = Array("{\"k\":".utf8) + encoded + Array("}".utf8)
            #expect(try JSONValue.parse(object)["k"]?.stringValue == s)
        }
        #expect(try JSONValue.parse(Array("\"a\\u00e9\\ud83d\\ude00b\"".utf8)) == .string("aé😀b"))
    }

    @Test("parse still refuses raw controls, bad UTF-8 and unterminated strings on the fast path")
    func parseRefusals() {
        for bad: [UInt8] in [[0x22, 0x61, 0x0A, 0x22], [0x22, 0x61, 0xFF, 0x22], [0x22, 0xC3, 0x22],
                             [0x22, 0x61, 0x62], [0x22, 0x61, 0x5C]] {
            #expect(throws: JSONError.self) { try JSONValue.parse(bad) }
        }
    }

    /// Before: C1 and bidi controls counted as their UTF-8 length (2 or 3) but are written as 6 bytes, so a batch
    /// of such lines could exceed the frame size the packer promised to stay under.
    @Test("the chunk size bound is at least the encoded size, also for text full of escaped controls")
    func sizeBoundHolds() {
        let texts = Self.samples + [String(repeating: "\u{85}", count: 8_000), String(repeating: "\u{2028}", count: 5_000),
                                    String(repeating: "\u{1}", count: 2_000), String(repeating: "é", count: 8_000)]
        for text in texts {
            let chunk = Chunk(seq: 9_007_199_254_740_992, text: text, final: false)
            let encoded = JSONValue.object(MessageCodec.chunkFields(chunk)).encoded()
            #expect(MessageCodec.encodedSizeBound(chunk) >= encoded.count, "\(text.prefix(8))")
        }
    }

    @Test("a batch of lines of escaped controls is packed into frames under the frame size")
    func packedFramesFit() {
        let line = String(repeating: "\u{85}", count: 4_000)  // 8,000 bytes of UTF-8, 24,000 bytes of JSON
        var window = OutboxWindow(session: "s-1", pending: (1...20).map { Chunk(seq: UInt64($0), text: line) })
        let outgoing = window.resumedOutgoing(delivered: 0, now: 0)
        #expect(outgoing.messages.flatMap(\.chunkSeqs) == Array(1...20))
        for item in outgoing {
            #expect(item.plaintext.count <= SpeakBridgeProtocol.maxFrameSize - 16)
        }
    }
}

@Suite("Chunk messages: the direct encoder writes what the JSONValue tree writes")
struct ChunkEncoderTests {
    static func chunks() -> [Chunk] {
        var generator = SystemRandomNumberGenerator()
        let texts = JSONStringFastPathTests.samples + JSONStringFastPathTests.generated()
        return texts.enumerated().map { i, text in
            let seq: UInt64 = [1, 9, 10, 99, 100, 123_456_789, 1 << 53][i % 7] + (i % 7 == 6 ? 0 : UInt64(i))
            let rare = Int.random(in: 0..<4, using: &generator) == 0
            return Chunk(seq: seq, text: text, final: i % 3 != 0, lang: rare ? "fr-CA" : nil,
                         speaker: rare && i % 2 == 0 ? "spk \u{85}1" : nil, start: rare ? 1.25 : nil,
                         end: rare && i % 2 == 1 ? 1e21 : nil)
        }
    }

    @Test("chunk and chunks messages: byte-identical to the tree encoding, and they decode back")
    func identical() throws {
        let all = Self.chunks()
        for chunk in all {
            let message = Message.chunk(session: "s-0123456789abcdef", chunk)
            #expect(MessageCodec.encode(message) == MessageCodec.json(message).encoded())
            #expect(try MessageCodec.decode(MessageCodec.encode(message)) == message)
            var object: [UInt8] = []
            MessageCodec.writeChunk(chunk, into: &object)
            #expect(object == JSONValue.object(MessageCodec.chunkFields(chunk)).encoded())
        }
        for start in stride(from: 0, to: all.count, by: 37) {
            let batch = all[start..<min(all.count, start + 37)].enumerated().map { i, c in
                var c = c
                c.seq = 1000 + UInt64(i)
                return c
            }
            let message = Message.chunks(session: "s-1", Array(batch))
            #expect(MessageCodec.encode(message) == MessageCodec.json(message).encoded())
            #expect(try MessageCodec.decode(MessageCodec.encode(message)) == message)
        }
    }

    @Test("decimal digits as String(_:) writes them")
    func decimals() {
        for v: UInt64 in [0, 1, 9, 10, 11, 99, 100, 1 << 53, UInt64.max] {
            var out: [UInt8] = []
            ASCIIDecimal.append(v, to: &out)
            #expect(out == Array(String(v).utf8))
        }
    }
}

@Suite("Chunk messages: the canonical decoder agrees with the general one")
struct CanonicalDecoderTests {
    static func canonical() -> [[UInt8]] {
        let chunks = ChunkEncoderTests.chunks().map { Chunk(seq: $0.seq, text: $0.text, final: $0.final) }
        var out = chunks.map { MessageCodec.encode(.chunk(session: "s-0123456789abcdef", $0)) }
        for start in stride(from: 0, to: chunks.count, by: 29) {
            let batch = chunks[start..<min(chunks.count, start + 29)].enumerated().map { i, c in
                Chunk(seq: 1 + UInt64(start) + UInt64(i), text: c.text, final: c.final)
            }
            out.append(MessageCodec.encode(.chunks(session: "s-1", batch)))
        }
        return out
    }

    @Test("every encoded chunk and chunks message takes the canonical path and decodes to the same message")
    func canonicalMatches() throws {
        for bytes in Self.canonical() {
            let fast = try #require(MessageCodec.decodeCanonical(bytes))
            #expect(try MessageCodec.decodeGeneral(bytes) == fast)
        }
    }

    /// Differential: whatever the canonical reader accepts, the general parser accepts as the same message.
    @Test("mutated messages: accepted only as the general parser reads them; rule breakers left to it")
    func mutations() throws {
        var generator = SystemRandomNumberGenerator()
        let seeds = Self.canonical()
        let interesting: [UInt8] = Array("0123456789\"\\,:{}[]ets- \u{1}".utf8) + [0x00, 0x7F, 0x80, 0xC3, 0xFF]
        var accepted = 0
        for _ in 0..<20_000 {
            var bytes = seeds.randomElement(using: &generator)!
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let at = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[at] = interesting.randomElement(using: &generator)!
                case 1: bytes.remove(at: at)
                default: bytes.insert(interesting.randomElement(using: &generator)!, at: at)
                }
                if bytes.isEmpty { break }
            }
            guard let fast = MessageCodec.decodeCanonical(bytes) else { continue }
            accepted += 1
            #expect(try MessageCodec.decodeGeneral(bytes) == fast, "\(String(decoding: bytes, as: UTF8.self))")
        }
        #expect(accepted > 0)
    }

    @Test("rule breakers in canonical form go to the general parser, which refuses them as before")
    func ruleBreakers() {
        let bad = [
            #"{"type":"chunk","session":"s 1","seq":1,"text":"a","final":true}"#,
            #"{"type":"chunk","session":"s-1","seq":0,"text":"a","final":true}"#,
            #"{"type":"chunk","session":"s-1","seq":9007199254740993,"text":"a","final":true}"#,
            #"{"type":"chunk","session":"s-1","seq":01,"text":"a","final":true}"#,
            #"{"type":"chunks","session":"s-1","chunks":[]}"#,
            #"{"type":"chunks","session":"s-1","chunks":[{"seq":1,"text":"a","final":true},{"seq":3,"text":"b","final":true}]}"#,
            #"{"type":"chunk","session":"s-1","seq":1,"text":"a","final":true}x"#,
        ]
        for text in bad {
            #expect(MessageCodec.decodeCanonical(Array(text.utf8)) == nil, "\(text)")
            #expect(throws: MessageError.self) { try MessageCodec.decode(Array(text.utf8)) }
        }
        let long = #"{"type":"chunk","session":"s-1","seq":1,"text":""# + String(repeating: "a", count: 16_385) + #"","final":true}"#
        #expect(MessageCodec.decodeCanonical(Array(long.utf8)) == nil)
        #expect(throws: MessageError.self) { try MessageCodec.decode(Array(long.utf8)) }
        let batch = (1...513).map { Chunk(seq: UInt64($0), text: "x") }
        let tooMany = MessageCodec.json(.chunks(session: "s-1", batch)).encoded()
        #expect(MessageCodec.decodeCanonical(tooMany) == nil)
        #expect(throws: MessageError.self) { try MessageCodec.decode(tooMany) }
    }
}
