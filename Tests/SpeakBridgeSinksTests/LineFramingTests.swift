import Testing
import SpeakBridgeProtocol
@testable import SpeakBridgeSinks

/// One-pass line framing: the stream is byte for byte each text sanitized alone plus "\n", concatenated.
@Suite struct LineFramingTests {
    static let texts = [
        "plain", "", "tab\tand\nnewline", "\u{1B}]52;c;SGVsbG8=\u{7}after", "\u{1B}[2Jclear", "cr\r\nlf\rcr",
        "bidi \u{202E}evil\u{202C} \u{2066}x\u{2069}", "c1 \u{85} \u{9B}31m", "é 日本 🎙️ \u{200F}rtl", "del\u{7F}",
        "\u{0}nul", String(repeating: "long ", count: 2_000), "unterminated \u{1B}]0;title",
    ]

    @Test("the plan's stream and ends match framing each text alone, sanitized or raw")
    func byteIdentical() {
        for sanitize in [true, false] {
            let plan = LineFraming.plan(Self.texts, sanitize: sanitize, limit: 4096)
            var expected: [UInt8] = []
            var ends: [Int] = []
            for text in Self.texts {
                expected += Array((sanitize ? OutputSanitizer.sanitize(text) : text).utf8) + [0x0A]
                ends.append(expected.count)
            }
            #expect(plan.stream == expected)
            #expect(plan.ends == ends)
            #expect(plan.count == Self.texts.count)
            #expect(Array(plan.frame(3)) == Array(expected[ends[2]..<ends[3]]))
        }
    }

    @Test("a sink item is one shared object: copies compare equal, equal contents compare equal")
    func sinkItemSharing() {
        let device = DeviceID(publicKeyDigest: Array(repeating: 7, count: 32))
        let a = SinkItem(device: device, deviceName: "phone", session: "s", chunk: Chunk(seq: 3, text: "hi"))
        let copy = a
        #expect(copy == a)
        #expect(SinkItem(device: device, deviceName: "phone", session: "s", chunk: Chunk(seq: 3, text: "hi")) == a)
        #expect(SinkItem(device: device, session: "s", chunk: Chunk(seq: 3, text: "hi")) != a)
        #expect(a.chunk.text == "hi" && a.session == "s" && a.deviceName == "phone" && a.device == device)
    }

    @Test("the word-at-a-time plain check agrees with the byte rule at every offset and length")
    func plainCheck() {
        var generator = SystemRandomNumberGenerator()
        let special: [UInt8] = [0x00, 0x09, 0x0A, 0x0D, 0x1B, 0x1F, 0x20, 0x7E, 0x7F, 0x80, 0x9B, 0xC2, 0xE2, 0xFF]
        for _ in 0..<5_000 {
            var bytes = (0..<Int.random(in: 0...40, using: &generator)).map { _ in UInt8.random(in: 0x20...0x7E, using: &generator) }
            if !bytes.isEmpty, Bool.random(using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = special.randomElement(using: &generator)!
            }
            let from = Int.random(in: 0...bytes.count, using: &generator)
            let expected = bytes[from...].allSatisfy { ($0 >= 0x20 && $0 < 0x7F) || $0 == 0x09 || $0 == 0x0A }
            #expect(bytes.withUnsafeBufferPointer { LineFraming.isPlain($0[from...]) } == expected, "\(bytes) from \(from)")
        }
    }
}
