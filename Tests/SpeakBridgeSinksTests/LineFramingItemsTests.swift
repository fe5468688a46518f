import Testing
import SpeakBridgeProtocol
@testable import SpeakBridgeSinks

/// The FIFO sink's item framing (`LineFraming.plan(items:)`, the burst path) against the general text framing, and
/// sink items that share one object per message.
@Suite struct LineFramingItemsTests {
    static let device = DeviceID(publicKeyDigest: Array(repeating: 9, count: 32))

    static func items(_ texts: [String], session: String = "s") -> [SinkItem] {
        SinkItem.items(device: device, deviceName: "phone", session: session,
                       chunks: texts.enumerated().map { Chunk(seq: UInt64($0) + 1, text: $1) })
    }

    /// The same items as the desktop makes them: chunks decoded from a frame, each text without an escape kept
    /// as the frame's bytes (`Chunk.textIsInBuffer`), the others as strings.
    static func decodedItems(_ texts: [String], session: String = "s") -> [SinkItem] {
        let chunks = texts.enumerated().map { Chunk(seq: UInt64($0) + 1, text: $1) }
        guard case let .chunks(_, decoded)? = try? MessageCodec.decode(MessageCodec.encode(.chunks(session: session, chunks)))
        else { fatalError("a batch of chunks decodes") }
        return SinkItem.items(device: device, deviceName: "phone", session: session, chunks: decoded)
    }

    static func same(_ a: ChunkPlan, _ b: ChunkPlan) -> Bool {
        a.stream == b.stream && a.ends == b.ends && a.limit == b.limit
    }

    @Test("item framing is byte for byte the text framing: plain, special, empty, long and mixed batches")
    func byteIdenticalToTextPlan() {
        let batches: [[String]] = [
            ["burst line 1 with some dictated words in it", "burst line 2 with some dictated words in it"],
            [""], ["", "", "x"], ["a"], ["12345678"], ["1234567", "123456789"],
            LineFramingTests.texts, [String(repeating: "long ", count: 2_000), "after"],
            ["plain", "\u{1B}[2Jclear", "plain again"], ["é", "tab\tnl\n"], ["del\u{7F}"], ["c1 \u{85}"],
        ]
        for texts in batches {
            for sanitize in [true, false] {
                let fast = LineFraming.plan(items: Self.items(texts), sanitize: sanitize, limit: 4096)
                let general = LineFraming.plan(texts, sanitize: sanitize, limit: 4096)
                #expect(Self.same(fast, general), "\(texts.map { $0.prefix(20) }) sanitize \(sanitize)")
                let decoded = Self.decodedItems(texts)
                #expect(Self.same(LineFraming.plan(items: decoded, sanitize: sanitize, limit: 4096), general))
                #expect(decoded.map(\.textUTF8Count) == texts.map(\.utf8.count))
            }
        }
    }

    @Test("random texts: item framing equals text framing")
    func randomBatches() {
        var generator = SystemRandomNumberGenerator()
        let alphabet: [String] = ["a", "Z", " ", "~", "\t", "\n", "\r", "\u{1B}", "\u{7F}", "\u{85}", "é", "\u{202E}",
                                  "🎙️", "\u{0}", "\"", "\\"]
        for _ in 0..<500 {
            let texts = (0..<Int.random(in: 1...6, using: &generator)).map { _ in
                var text = String(repeating: "w", count: Int.random(in: 0...30, using: &generator))
                for _ in 0..<Int.random(in: 0...2, using: &generator) {
                    let offset = Int.random(in: 0...text.count, using: &generator)
                    text.insert(contentsOf: alphabet.randomElement(using: &generator)!,
                                at: text.index(text.startIndex, offsetBy: offset))
                }
                return text
            }
            let sanitize = Bool.random(using: &generator)
            #expect(Self.same(LineFraming.plan(items: Self.items(texts), sanitize: sanitize, limit: 4096),
                              LineFraming.plan(texts, sanitize: sanitize, limit: 4096)), "\(texts)")
            #expect(Self.same(LineFraming.plan(items: Self.decodedItems(texts), sanitize: sanitize, limit: 4096),
                              LineFraming.plan(texts, sanitize: sanitize, limit: 4096)), "\(texts)")
        }
    }

    @Test("the plain check with a special byte at every position of runs up to 40 bytes (word and tail paths)")
    func plainEveryPosition() {
        let special: [UInt8] = [0x00, 0x09, 0x0A, 0x0D, 0x1B, 0x1F, 0x7F, 0x80, 0x9B, 0xC2, 0xFF]
        for length in 1...40 {
            for at in 0..<length {
                for byte in special {
                    var bytes = Array(repeating: UInt8(ascii: "q"), count: length)
                    bytes[at] = byte
                    let expected = byte == 0x09 || byte == 0x0A
                    #expect(bytes.withUnsafeBufferPointer { LineFraming.isPlain($0[...]) } == expected,
                            "length \(length) at \(at) byte \(byte)")
                }
            }
            let plain = Array(repeating: UInt8(ascii: "q"), count: length)
            #expect(plain.withUnsafeBufferPointer { LineFraming.isPlain($0[...]) })
        }
    }

    @Test("items of one message share one object and read as the chunks they were made from")
    func sharedItems() {
        let chunks = (1...3).map { Chunk(seq: 40 + $0, text: "t\($0)", final: $0 != 2) }
        let items = SinkItem.items(device: Self.device, deviceName: "phone", session: "s-1", chunks: chunks)
        #expect(items.count == 3)
        for (item, chunk) in zip(items, chunks) {
            #expect(item.chunk == chunk && item.text == chunk.text && item.seq == chunk.seq)
            #expect(item.device == Self.device && item.deviceName == "phone" && item.session == "s-1")
            #expect(item == SinkItem(device: Self.device, deviceName: "phone", session: "s-1", chunk: chunk))
        }
        #expect(items[0] != items[1])
        #expect(items[0].isSameSession(as: items[2]))
        #expect(items[0].isSameSession(as: SinkItem(device: Self.device, session: "s-1", chunk: chunks[0])))
        #expect(!items[0].isSameSession(as: SinkItem(device: Self.device, session: "s-2", chunk: chunks[0])))
        let other = DeviceID(publicKeyDigest: Array(repeating: 8, count: 32))
        #expect(!items[0].isSameSession(as: SinkItem(device: other, session: "s-1", chunk: chunks[0])))
        #expect(SinkItem.items(device: Self.device, session: "s", chunks: []).isEmpty)
        // Items of decoded chunks (texts in the frame) read the same.
        let decoded = Self.decodedItems(["t1", "é", ""])
        #expect(decoded.map(\.text) == ["t1", "é", ""])
        #expect(decoded.map { $0.withTextUTF8 { Array($0) } } == [Array("t1".utf8), Array("é".utf8), []])
        #expect(decoded.map(\.chunk.textIsInBuffer) == [true, true, false])
    }
}
