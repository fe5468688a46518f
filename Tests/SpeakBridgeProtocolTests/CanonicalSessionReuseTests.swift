import Testing
@testable import SpeakBridgeProtocol

/// The canonical decoder's session ID: the byte map against the range rule, and a known session handed back
/// as the same string only when the bytes are exactly its own.
@Suite("Canonical session IDs: byte map and reuse")
struct CanonicalSessionReuseTests {
    @Test("the session byte map agrees with the range rule for all 256 bytes")
    func byteMap() {
        for value in 0...255 {
            let b = UInt8(value)
            let expected = (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: "-")
            #expect(CanonicalReader.isSessionByte(b) == expected, "byte \(value)")
        }
    }

    static func storage(_ s: String) -> UnsafeRawPointer? {
        var s = s
        return s.withUTF8 { UnsafeRawPointer($0.baseAddress) }
    }

    @Test("a known session with the same bytes is handed back itself; any other session is read as usual")
    func reuse() throws {
        let known = "0123456789abcdef-session.ID_long"  // longer than a small string: it has its own storage
        let chunk = Chunk(seq: 3, text: "hello")
        let same = MessageCodec.encode(.chunk(session: known, chunk))
        let decoded = try #require(MessageCodec.decodeCanonical(same, knownSession: known))
        #expect(decoded == .chunk(session: known, chunk))
        guard case .chunk(let session, _) = decoded else { Issue.record("not a chunk"); return }
        #expect(Self.storage(session) == Self.storage(known))
        let batch = MessageCodec.encode(.chunks(session: known, [chunk, Chunk(seq: 4, text: "x")]))
        #expect(MessageCodec.decodeCanonical(batch, knownSession: known)
                == .chunks(session: known, [chunk, Chunk(seq: 4, text: "x")]))
        for other in ["0123456789abcdef-session.ID_lon", "0123456789abcdef-session.ID_longer", "s",
                      "0123456789abcdef-session.ID_lonG", "x123456789abcdef-session.ID_long"] {
            let bytes = MessageCodec.encode(.chunk(session: other, chunk))
            let message = MessageCodec.decodeCanonical(bytes, knownSession: known)
            #expect(message == .chunk(session: other, chunk), "\(other)")
            #expect(message == MessageCodec.decodeCanonical(bytes), "\(other)")
        }
        // A session that starts with the known one and goes on with bytes that are not session bytes: refused.
        for tail in [" x", "\u{7F}", "é", "\\u0041"] {
            let bad = Array(#"{"type":"chunk","session":""#.utf8) + Array((known + tail).utf8)
                + Array(#"","seq":1,"text":"t","final":true}"#.utf8)
            #expect(MessageCodec.decodeCanonical(bad, knownSession: known) == nil, "\(tail)")
        }
        // Cut right after the known session's bytes: refused.
        let cut = Array(#"{"type":"chunk","session":""#.utf8) + Array(known.utf8)
        #expect(MessageCodec.decodeCanonical(cut, knownSession: known) == nil)
    }
}
