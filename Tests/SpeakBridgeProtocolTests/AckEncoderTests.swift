import Testing
@testable import SpeakBridgeProtocol

/// `AckEncoder` writes byte for byte what the general encoder writes for `.ack` (the client's parser and any
/// canonical reader see no difference).
@Suite("Ack encoder")
struct AckEncoderTests {
    /// Random sessions: mostly valid session IDs, also strings with escapes, controls, bidi and non-ASCII.
    static func randomSession(_ rng: inout some RandomNumberGenerator) -> String {
        let plain = Array("ABCXYZabcxyz0189._-")
        let odd: [Character] = ["\"", "\\", "\n", "\t", "\u{0}", "\u{1B}", "\u{7F}", "\u{85}", "\u{202E}", "\u{2028}",
                                "é", "🎤", " ", "/", "{"]
        let length = Int.random(in: 0...70, using: &rng)
        return String((0..<length).map { _ in
            Int.random(in: 0..<10, using: &rng) == 0 ? odd.randomElement(using: &rng)! : plain.randomElement(using: &rng)!
        })
    }

    static func randomSeq(_ rng: inout some RandomNumberGenerator) -> UInt64 {
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: UInt64.random(in: 0...10, using: &rng)
        case 1: UInt64.random(in: 0...1 << 53, using: &rng)
        case 2: (1 << 53) - UInt64.random(in: 0...3, using: &rng)
        default: UInt64.random(in: 0...UInt64(Int64.max), using: &rng)
        }
    }

    @Test func randomAcksEncodeAsTheGeneralEncoderDoes() {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let session = Self.randomSession(&rng)
            let seq = Self.randomSeq(&rng)
            let general = MessageCodec.json(.ack(session: session, seq: seq)).encoded()
            #expect(AckEncoder.encode(session: session, seq: seq) == general, "session \(session.debugDescription), seq \(seq)")
            #expect(MessageCodec.encode(.ack(session: session, seq: seq)) == general)
        }
    }

    @Test func edgeValuesAndTheWireForm() throws {
        for (session, seq) in [("s", UInt64(0)), ("s", 1), ("s", 9), ("s", 10), ("meeting_2026.11", 1 << 53),
                               (String(repeating: "x", count: 64), UInt64(Int64.max))] {
            let bytes = AckEncoder.encode(session: session, seq: seq)
            #expect(bytes == MessageCodec.json(.ack(session: session, seq: seq)).encoded())
            if seq <= 1 << 53 { #expect(try MessageCodec.decode(bytes) == .ack(session: session, seq: seq)) }
        }
        #expect(String(decoding: AckEncoder.encode(session: "s", seq: 3), as: UTF8.self)
                == #"{"type":"ack","session":"s","seq":3}"#)
    }
}
