import Testing
@testable import SpeakBridgeProtocol

/// The client's ack fast path reads exactly what `MessageCodec.decode` reads, or leaves the frame to it.
@Suite("CanonicalAck: the desktop's acks without the JSON tree")
struct CanonicalAckTests {
    static let sessions = ["s-0123456789abcdef", "a", String(repeating: "Z", count: 64), "x.y_z-9"]
    static let seqs: [UInt64] = [0, 1, 9, 10, 4_096, 1 << 32, (1 << 53) - 1, 1 << 53]

    @Test("every ack `encode` writes is read by the fast path, as `decode` reads it")
    func encodedAcks() throws {
        for session in Self.sessions {
            for seq in Self.seqs {
                let bytes = MessageCodec.encode(.ack(session: session, seq: seq))
                let fast = try #require(CanonicalAck.decode(bytes), "\(String(decoding: bytes, as: UTF8.self))")
                #expect(fast == .ack(session: session, seq: seq))
                #expect(fast == (try MessageCodec.decode(bytes)))
            }
        }
    }

    @Test("other spellings and invalid acks are left to `decode`", arguments: [
        #"{"type":"ack","session":"s-1","seq":1 }"#, #"{"type":"ack", "session":"s-1","seq":1}"#,
        #"{"type":"ack","seq":1,"session":"s-1"}"#, #"{"type":"ack","session":"s-1","seq":1,"x":2}"#,
        #"{"type":"ack","session":"s\u002d1","seq":1}"#, #"{"type":"ack","session":"","seq":1}"#,
        #"{"type":"ack","session":"s 1","seq":1}"#, #"{"type":"ack","session":"s-1","seq":01}"#,
        #"{"type":"ack","session":"s-1","seq":-1}"#, #"{"type":"ack","session":"s-1","seq":1.0}"#,
        #"{"type":"ack","session":"s-1","seq":9007199254740993}"#,
        #"{"type":"ack","session":"s-1","seq":99999999999999999999}"#, #"{"type":"ack","session":"s-1","seq":}"#,
        #"{"type":"ack","session":"s-1","seq":1}}"#, #"{"type":"ack","session":"s-1","seq":1"#,
        #"{"type":"acks","session":"s-1","seq":1}"#, #"{"type":"ack","session":"s-1"}"#,
        "{\"type\":\"ack\",\"session\":\"" + String(repeating: "a", count: 65) + "\",\"seq\":1}",
    ])
    func otherSpellings(text: String) {
        #expect(CanonicalAck.decode(Array(text.utf8)) == nil)
    }

    @Test("any byte changed in an encoded ack: the fast path agrees with `decode` or stays out")
    func mutations() {
        let bytes = MessageCodec.encode(.ack(session: "s-0123456789abcdef", seq: 123_456))
        for index in bytes.indices {
            for value: UInt8 in [0x00, 0x20, 0x22, 0x30, 0x39, 0x2D, 0x5C, 0x7D, 0x80, 0xFF] {
                var mutated = bytes
                mutated[index] = value
                guard let fast = CanonicalAck.decode(mutated) else { continue }
                #expect(fast == (try? MessageCodec.decode(mutated)), "byte \(index) = \(value)")
            }
            #expect(CanonicalAck.decode(Array(bytes[..<index])) == nil)
        }
    }
}
