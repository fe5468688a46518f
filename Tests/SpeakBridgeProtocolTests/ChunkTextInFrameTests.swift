import Testing
@testable import SpeakBridgeProtocol
import SpeakBridgeTestSupport

/// A decoded chunk keeps its text as bytes of the frame (no `String` per line): the UTF-8 check that replaced the
/// string's, what the chunk says about its text, and the ledger's rule that a kept chunk never holds a frame of
/// duplicates.
@Suite("Chunk texts kept in their frame")
struct ChunkTextInFrameTests {
    static func valid(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { UTF8Check.isValid($0) }
    }

    static func stdlibValid(_ bytes: [UInt8]) -> Bool {
        String(validating: bytes, as: UTF8.self) != nil
    }

    @Test("UTF8Check agrees with the standard library on every sequence of one and two bytes")
    func shortSequences() {
        for a in 0...255 {
            #expect(Self.valid([UInt8(a)]) == Self.stdlibValid([UInt8(a)]), "\(a)")
            for b in 0...255 {
                let bytes = [UInt8(a), UInt8(b)]
                if Self.valid(bytes) != Self.stdlibValid(bytes) { Issue.record("\(bytes)") }
            }
        }
    }

    @Test("UTF8Check agrees on every three-byte sequence with a multi-byte lead, and on four-byte leads")
    func longSequences() {
        // Each continuation position takes the bytes where the rules change (and a few ordinary ones).
        let edges: [UInt8] = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xE0, 0xED, 0xF0, 0xF4, 0xFF]
        var mismatches = 0
        for lead in 0xC0...0xFF {
            for second in 0...255 {
                for third in edges {
                    let three = [UInt8(lead), UInt8(second), third]
                    if Self.valid(three) != Self.stdlibValid(three) { mismatches += 1 }
                    // A fourth byte matters only after a four-byte lead (and F5…F7, which are never valid).
                    guard lead >= 0xF0 && lead <= 0xF7 else { continue }
                    for fourth in edges {
                        let four = three + [fourth]
                        if Self.valid(four) != Self.stdlibValid(four) { mismatches += 1 }
                    }
                }
            }
        }
        #expect(mismatches == 0)
    }

    @Test("UTF8Check agrees on random texts of mixed scripts, whole and cut or corrupted at random places")
    func randomTexts() {
        var rng = SplitMix64(seed: 0x5B_07)
        let pieces = ["a", "plain words ", "é", "ü", "日本", "🎙️", "👩‍👩‍👧", "\u{7F}", "𝄞", "\u{10FFFF}", "\u{FFFD}"]
        for _ in 0..<3_000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int.random(in: 1...12, using: &rng) { bytes += Array(pieces.randomElement(using: &rng)!.utf8) }
            #expect(Self.valid(bytes))
            var bent = bytes
            switch Int.random(in: 0...2, using: &rng) {
            case 0: bent.removeLast(Int.random(in: 0...min(3, bent.count - 1), using: &rng))
            case 1: bent[Int.random(in: 0..<bent.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            default: bent.insert(UInt8.random(in: 0x80...0xFF, using: &rng), at: Int.random(in: 0...bent.count, using: &rng))
            }
            if Self.valid(bent) != Self.stdlibValid(bent) { Issue.record("\(bent)") }
        }
    }

    @Test("a canonical chunk's text stays in the frame; reading it gives the text, its bytes and its size")
    func textInFrame() throws {
        let texts = ["dictated words", "é ü ß 日本語 🎙️", "x"]
        let batch = texts.enumerated().map { Chunk(seq: 10 + UInt64($0), text: $1) }
        let frame = MessageCodec.encode(.chunks(session: "s-1", batch))
        guard case let .chunks(_, decoded)? = MessageCodec.decodeCanonical(frame) else {
            Issue.record("not canonical")
            return
        }
        #expect(decoded == batch)
        for (chunk, text) in zip(decoded, texts) {
            #expect(chunk.textIsInBuffer)
            #expect(chunk.text == text)
            #expect(chunk.textUTF8Count == text.utf8.count)
            #expect(chunk.withTextUTF8 { Array($0) } == Array(text.utf8))
        }
        // Re-encoded from the frame's bytes: the same message.
        #expect(MessageCodec.encode(.chunks(session: "s-1", decoded)) == frame)
    }

    @Test("texts with escapes, and the empty text, are made as strings; a changed text leaves the frame")
    func stringsWhereNeeded() throws {
        let batch = [Chunk(seq: 1, text: "say \"hi\""), Chunk(seq: 2, text: ""), Chunk(seq: 3, text: "plain")]
        guard case var .chunks(_, decoded)? = MessageCodec.decodeCanonical(MessageCodec.encode(.chunks(session: "s", batch)))
        else {
            Issue.record("not canonical")
            return
        }
        #expect(decoded.map(\.textIsInBuffer) == [false, false, true])
        #expect(decoded == batch)
        decoded[2].text = "changed"
        #expect(!decoded[2].textIsInBuffer)
        #expect(decoded[2].text == "changed" && decoded[2].textUTF8Count == 7)
        #expect(decoded[2].withTextUTF8 { Array($0) } == Array("changed".utf8))
        let detached = decoded[0].detached()
        #expect(detached == decoded[0])
    }

    @Test("a chunk whose frame also held duplicates is detached from the frame; an all-new frame is kept as it is")
    func ledgerDetachesFromFramesOfDuplicates() throws {
        func decode(_ seqs: ClosedRange<UInt64>) throws -> [Chunk] {
            let batch = seqs.map { Chunk(seq: $0, text: "line \($0) of the stream") }
            guard case let .chunks(_, chunks)? = MessageCodec.decodeCanonical(MessageCodec.encode(.chunks(session: "s", batch)))
            else { throw CanonicalFailure() }
            return chunks
        }
        var ledger = SessionLedger()
        let first = ledger.offer(session: "s", chunks: try decode(1...4)).accepted
        #expect(first.map(\.seq) == [1, 2, 3, 4] && first.allSatisfy(\.textIsInBuffer))
        // A resend of 1...4 with one new line: the new line alone is kept, and it must not pin the whole frame.
        let resend = ledger.offer(session: "s", chunks: try decode(1...5))
        #expect(resend.accepted.map(\.seq) == [5] && resend.duplicates == 4)
        #expect(resend.accepted.allSatisfy { !$0.textIsInBuffer })
        #expect(resend.accepted.first?.text == "line 5 of the stream")
    }

    struct CanonicalFailure: Error {}
}
