import Testing
@testable import SpeakBridgeProtocol

/// The canonical reader checks a session ID on its bytes: it accepts exactly what `isValidSessionID` accepts in
/// the plain quoted form, and leaves everything else (escapes, bad bytes, bad lengths) to the general parser.
@Suite("Canonical session IDs")
struct CanonicalSessionTests {
    func frame(_ sessionJSON: [UInt8]) -> [UInt8] {
        Array(#"{"type":"chunk","session":"#.utf8) + sessionJSON + Array(#","seq":1,"text":"a","final":true}"#.utf8)
    }

    @Test("every byte value, as a one-byte session and inside a longer one: same verdict as isValidSessionID")
    func everyByte() {
        for b in 0...255 as ClosedRange<UInt8> where b != UInt8(ascii: "\"") && b != UInt8(ascii: "\\") {
            for body: [UInt8] in [[b], Array("ab".utf8) + [b] + Array("cd".utf8)] {
                let bytes = frame([0x22] + body + [0x22])
                let canonical = MessageCodec.decodeCanonical(bytes)
                let general = try? MessageCodec.decode(bytes)
                let valid = MessageCodec.isValidSessionID(String(decoding: body, as: UTF8.self))
                    && body.allSatisfy { $0 < 0x80 }
                #expect((canonical != nil) == valid, "byte \(b)")
                if let canonical { #expect(canonical == general, "byte \(b)") }
            }
        }
    }

    @Test("lengths 0, 1, 63, 64 and 65, and an escaped session, match the general parser")
    func lengthsAndEscapes() {
        for n in [0, 1, 63, 64, 65, 200] {
            let body = Array(String(repeating: "x", count: n).utf8)
            let bytes = frame([0x22] + body + [0x22])
            let canonical = MessageCodec.decodeCanonical(bytes)
            #expect((canonical != nil) == (1...64).contains(n), "length \(n)")
            if let canonical { #expect(canonical == (try? MessageCodec.decode(bytes))) }
            if canonical == nil { #expect((try? MessageCodec.decode(bytes)) == nil, "length \(n)") }
        }
        // `\u0041` is "A" to the general parser: the canonical path steps aside, the result is the same message.
        let escaped = frame(Array(#""s\u0041""#.utf8))
        #expect(MessageCodec.decodeCanonical(escaped) == nil)
        #expect((try? MessageCodec.decode(escaped)) == .chunk(session: "sA", Chunk(seq: 1, text: "a")))
    }
}
