#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import SpeakBridgeProtocol
@testable import SpeakBridgeStore

/// `send` journals plain lines straight from their bytes (`Outbox.append(lines:)`, `append(line:)`): the journal,
/// the chunks, their encoded objects and the messages a window makes of them are exactly what the same lines give as
/// texts (`append(texts:)`, `append(text:)`), and a chunk whose encoded bytes went out still holds its text for a
/// resend.
@Suite("Outbox: lines journaled from their bytes")
struct OutboxPlainLinesTests {
    struct Journal: JournalFixture {
        let root: String
    }

    static let words = ["dictated", "words", "a", "1234567", "~!#$%&'()*+,-./:;<=>?@[]^_`{|}", "Z", "   "]

    /// Random plain lines, and the bytes they are in (each followed by junk that is not part of any line).
    static func lines(_ count: Int, _ generator: inout some RandomNumberGenerator) -> (bytes: [UInt8], ranges: [Range<Int>], texts: [String]) {
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []
        var texts: [String] = []
        for _ in 0..<count {
            let text = (0..<Int.random(in: 1...12, using: &generator)).map { _ in words.randomElement(using: &generator)! }
                .joined(separator: " ")
            ranges.append(bytes.count..<(bytes.count + text.utf8.count))
            bytes += Array(text.utf8) + [0x0A, 0xFF]
            texts.append(text)
        }
        return (bytes, ranges, texts)
    }

    static func pair() throws -> (Journal, Outbox, Journal, Outbox) {
        let tag = "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let a = Journal(root: "/tmp/sb-plain-a-\(tag)"), b = Journal(root: "/tmp/sb-plain-b-\(tag)")
        let outboxA = try Outbox(home: a.home, desktop: a.device)
        let outboxB = try Outbox(home: b.home, desktop: b.device)
        // The same session name on both sides, so their messages compare byte for byte.
        #expect(outboxA.nextSeq == outboxB.nextSeq)
        return (a, outboxA, b, outboxB)
    }

    @Test("batches and single lines: the same journal records and chunks as the texts give")
    func sameAsTexts() throws {
        let (a, bytesSide, b, textSide) = try Self.pair()
        defer { a.cleanup(); b.cleanup() }
        var generator = SystemRandomNumberGenerator()
        for round in 0..<60 {
            let (bytes, ranges, texts) = Self.lines(round % 3 == 0 ? 1 : Int.random(in: 2...300, using: &generator), &generator)
            let plain = try #require(PlainLines.make(bytes: bytes, ranges: ranges))
            let ack = UInt64(round)
            let fromBytes = ranges.count == 1 ? [try bytesSide.append(line: plain, ack: ack)]
                : try bytesSide.append(lines: plain, ack: ack)
            let fromTexts = ranges.count == 1 ? [try textSide.append(text: texts[0], ack: ack)]
                : try textSide.append(texts: texts, ack: ack)
            #expect(fromBytes == fromTexts)
            #expect(fromBytes.map(\.encoded) == fromTexts.map(\.encoded))
            #expect(fromBytes.allSatisfy(\.textIsInBuffer) && !fromTexts.contains(where: \.textIsInBuffer))
            #expect(fromBytes.map(\.text) == texts && fromBytes.map(\.textUTF8Count) == texts.map(\.utf8.count))
        }
        let journalA = try #require(try LogFile.readRecords(a.path))
        let journalB = try #require(try LogFile.readRecords(b.path))
        // The journals differ only in their headers (each names its own session); the line records are equal.
        let records = { (journal: [UInt8]) in journal.split(separator: 0x0A).filter { $0.starts(with: Array(#"{"c":"#.utf8)) } }
        #expect(records(journalA) == records(journalB) && records(journalA).count > 60)
    }

    @Test("a chunk from bytes keeps its text after its encoded bytes went out: a resend writes the same object")
    func resendAfterTheEncodedBytesWentOut() throws {
        let (a, outbox, b, _) = try Self.pair()
        defer { a.cleanup(); b.cleanup() }
        var generator = SystemRandomNumberGenerator()
        let (bytes, ranges, texts) = Self.lines(50, &generator)
        let chunks = try outbox.append(lines: try #require(PlainLines.make(bytes: bytes, ranges: ranges)))
        var window = OutboxWindow(session: outbox.session, pending: [])
        _ = window.resumedOutgoing(delivered: 0, now: 0)
        let sent = window.appendOutgoing(contentsOf: chunks)
        #expect(!sent.isEmpty)
        #expect(window.pending.allSatisfy { $0.encoded == nil && $0.textIsInBuffer })
        #expect(window.pending.map(\.text) == texts)
        // After a reconnect the window sends them again, escaped from their texts: the same messages.
        let again = window.resumedOutgoing(delivered: 0, now: 1)
        let reference = window.pending.map { Chunk(seq: $0.seq, text: $0.text) }
        #expect(again.compactMap(\.message).flatMap(\.carriedChunks) == reference)
        for item in again {
            let message = try #require(item.message)
            #expect(item.plaintext == MessageCodec.json(message).encoded())
        }
    }

    @Test("only non-empty plain lines within the limits are plain lines")
    func whatIsPlain() {
        func plain(_ text: [UInt8]) -> Bool { PlainLines.make(bytes: text, ranges: [0..<text.count]) != nil }
        #expect(plain(Array("printable ASCII ~ { } [ ] ' / ".utf8)))
        for bad: [UInt8] in [[0x22], [0x5C], [0x7F], [0x09], [0x0A], [0x00], [0xC3, 0xA9], [0x80]] {
            #expect(!plain(Array("ok".utf8) + bad), "\(bad)")
        }
        #expect(!plain([]))  // a blank line is no chunk
        #expect(plain(Array(repeating: 0x61, count: SpeakBridgeProtocol.maxChunkTextBytes)))
        #expect(!plain(Array(repeating: 0x61, count: SpeakBridgeProtocol.maxChunkTextBytes + 1)))
        #expect(PlainLines.make(bytes: [0x61], ranges: []) == nil)
        #expect(PlainLines.make(bytes: [0x61], ranges: [0..<2]) == nil)  // outside the bytes
    }
}
