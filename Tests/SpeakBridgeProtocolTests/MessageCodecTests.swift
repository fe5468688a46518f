import SpeakBridgeTestSupport
import Testing
@testable import SpeakBridgeProtocol

@Suite("JSON and message codec")
struct MessageCodecTests {
    static let samples: [Message] = [
        .pair(name: "pixel"),
        .pairAccept(name: "desk", id: "7RQ4-K2M9-XW3D-8HNP"),
        .pairConfirm, .paired,
        .hello(agent: "speakbridge/0.1"), .welcome,
        .resume(session: "s-1", delivered: nil),
        .resume(session: "s-1", delivered: 42),
        .chunk(session: "s-1", Chunk(seq: 1, text: "héllo \"wörld\"\n\t\u{1B}[2J 🎤", final: true)),
        .chunk(session: "meeting_2026.11", Chunk(seq: 9_007_199_254_740_992, text: "x", final: false, lang: "de-DE",
                                                 speaker: "A", start: 1.5, end: 2.25)),
        .chunks(session: "s", [Chunk(seq: 5, text: "a"), Chunk(seq: 6, text: "b"), Chunk(seq: 7, text: "")]),
        .ack(session: "s", seq: 0), .ack(session: "s", seq: 77),
        .bye,
        .error(code: .unknownType, message: "nope", expected: nil),
        .error(code: .gap, message: "", expected: 3),
    ]

    @Test("every message round-trips", arguments: samples)
    func roundTrip(_ message: Message) throws {
        let bytes = MessageCodec.encode(message)
        #expect(try MessageCodec.decode(bytes) == message)
    }

    @Test("every strict prefix of an encoding is rejected, never crashes", arguments: samples)
    func prefixes(_ message: Message) {
        let bytes = MessageCodec.encode(message)
        for n in 0..<bytes.count {
            #expect(throws: MessageError.self) { try MessageCodec.decode(Array(bytes[0..<n])) }
        }
    }

    @Test func encodingIsDeterministic() {
        #expect(String(decoding: MessageCodec.encode(.ack(session: "s", seq: 3)), as: UTF8.self)
                == #"{"type":"ack","session":"s","seq":3}"#)
        #expect(String(decoding: MessageCodec.encode(.chunk(session: "s", Chunk(seq: 1, text: "a\u{1}"))), as: UTF8.self)
                == #"{"type":"chunk","session":"s","seq":1,"text":"a\u0001","final":true}"#)
    }

    @Test func unknownFieldsAreIgnored() throws {
        let json = #"{"type":"ack","session":"s","seq":3,"future":{"x":[1,2]}}"#
        #expect(try MessageCodec.decode(Array(json.utf8)) == .ack(session: "s", seq: 3))
    }

    @Test func unknownTypeIsReportedAsSuch() {
        #expect(throws: MessageError.unknownType("teleport")) {
            try MessageCodec.decode(Array(#"{"type":"teleport"}"#.utf8))
        }
    }

    @Test("hostile or malformed documents are rejected", arguments: [
        #"[]"#, #"{}"#, #"{"type":1}"#, #"{"type":"ack","session":"s","seq":-1}"#,
        #"{"type":"ack","session":"s","seq":9007199254740993}"#, #"{"type":"ack","session":"s","seq":1.5}"#,
        #"{"type":"ack","session":"","seq":1}"#, #"{"type":"ack","session":"a/b","seq":1}"#,
        #"{"type":"ack","session":"s","seq":true}"#, #"{"type":"chunk","session":"s","seq":0,"text":"x"}"#,
        #"{"type":"chunk","session":"s","seq":1}"#, #"{"type":"chunk","session":"s","seq":1,"text":"x","final":1}"#,
        #"{"type":"chunks","session":"s","chunks":[]}"#,
        #"{"type":"chunks","session":"s","chunks":[{"seq":1,"text":"a"},{"seq":3,"text":"b"}]}"#,
        #"{"type":"ack","type":"ack","session":"s","seq":1}"#, #"{"type":"bye"} x"#,
        #"{"type":"bye","a":"\ud800"}"#, #"{"type":"bye","a":[[[[[[[[[[1]]]]]]]]]]}"#,
        "{\"type\":\"bye\",\"a\":\"\u{1}\"}",
    ])
    func rejected(_ json: String) {
        #expect(throws: MessageError.self) { try MessageCodec.decode(Array(json.utf8)) }
    }

    @Test func oversizeTextIsRejected() {
        let text = String(repeating: "a", count: SpeakBridgeProtocol.maxChunkTextBytes + 1)
        let bytes = MessageCodec.encode(.chunk(session: "s", Chunk(seq: 1, text: text)))
        #expect(throws: MessageError.self) { try MessageCodec.decode(bytes) }
    }

    @Test func invalidUTF8IsRejected() {
        var bytes = Array(#"{"type":"bye","x":"ab"}"#.utf8)
        bytes[19] = 0xFF
        #expect(throws: MessageError.self) { try MessageCodec.decode(bytes) }
    }

    @Test func surrogatePairsDecode() throws {
        let v = try JSONValue.parse(Array(#""\ud83c\udfa4""#.utf8))
        #expect(v == .string("🎤"))
    }

    @Test func randomBytesNeverCrash() {
        var rng = SplitMix64(seed: 7)
        let seed = MessageCodec.encode(.chunks(session: "s", [Chunk(seq: 1, text: "a", lang: "en"), Chunk(seq: 2, text: "b")]))
        for _ in 0..<5_000 {
            var bytes = seed
            for _ in 0..<Int(rng.next() % 4 + 1) {
                bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next())
            }
            _ = try? MessageCodec.decode(bytes)
        }
    }
}
