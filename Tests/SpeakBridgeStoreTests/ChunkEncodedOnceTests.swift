#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
@testable import SpeakBridgeProtocol
import Testing
@testable import SpeakBridgeStore

/// A chunk's JSON object is written once, into its journal record, and its message copies those bytes
/// (`Chunk.encoded`). The journal and the wire must be byte for byte what they were when each escaped the text
/// itself: checked against the general encoder (`JSONValue`) and against chunks without the cached bytes, on many
/// random texts (controls, quotes, backslashes, C1 and bidi controls, repaired invalid UTF-8, emoji, 16 KiB lines).
@Suite("Chunks: escaped once, the same bytes in the journal and on the wire")
struct ChunkEncodedOnceTests: JournalFixture {
    let root = "/tmp/sb-chunk-once-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    static let palette: [String] = [
        "a", "Z", "0", " ", "word ", "\"", "\\", "/", "\n", "\r", "\t", "\u{0}", "\u{1}", "\u{1F}", "\u{7F}",
        "\u{80}", "\u{85}", "\u{9F}", "\u{A0}", "é", "ß", "\u{200E}", "\u{202A}", "\u{202E}", "\u{2028}", "\u{2029}",
        "\u{2066}", "\u{2069}", "\u{FEFF}", "\u{FFFD}", "\u{FFFF}", "中文", "😀", "👩‍👩‍👧", "e\u{301}", "\u{10FFFF}",
    ]

    static func randomText(_ generator: inout some RandomNumberGenerator) -> String {
        switch Int.random(in: 0..<10, using: &generator) {
        case 0:
            // Arbitrary bytes, repaired to valid UTF-8 as `send` reads its input (U+FFFD for what is invalid).
            let bytes = (0..<Int.random(in: 0...200, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            return String(decoding: bytes, as: UTF8.self)
        case 1:
            // A long line: 16 KiB of mostly plain text with an escape somewhere.
            var text = String(repeating: "dictated words ", count: (16_384 - 20) / 15)  // + one palette entry: at most 16 KiB
            text += palette.randomElement(using: &generator)!
            return text
        default:
            return (0..<Int.random(in: 0...60, using: &generator)).map { _ in palette.randomElement(using: &generator)! }.joined()
        }
    }

    /// The journal record as it was written before: `{"c":` + the general encoder's chunk object + `}` + newline.
    static func oldRecord(_ chunk: Chunk) -> [UInt8] {
        Array(#"{"c":"#.utf8) + JSONValue.object(MessageCodec.chunkFields(chunk)).encoded() + Array("}\n".utf8)
    }

    /// The same fields without cached bytes.
    static func plain(_ c: Chunk) -> Chunk {
        Chunk(seq: c.seq, text: c.text, final: c.final, lang: c.lang, speaker: c.speaker, start: c.start, end: c.end)
    }

    @Test("batches: journal records, messages, their bytes and their batching unchanged")
    func batchesAreByteIdentical() throws {
        defer { cleanup() }
        var generator = SystemRandomNumberGenerator()
        let outbox = try Outbox(home: home, desktop: device)
        try outbox.reserve(through: 1)  // its record first: every chunk below is covered (`Outbox`: Reservations)
        let headerSize = (try LogFile.readRecords(path) ?? []).count
        var expectedJournal: [UInt8] = []
        var cached: [Chunk] = []
        for _ in 0..<40 {
            let texts = (0..<Int.random(in: 1...40, using: &generator)).map { _ in Self.randomText(&generator) }
            let chunks = try outbox.append(texts: texts)
            #expect(chunks.allSatisfy { $0.encoded != nil })
            for chunk in chunks {
                expectedJournal += Self.oldRecord(chunk)
                #expect(MessageCodec.encodedSizeBound(chunk) == MessageCodec.encodedSizeBound(Self.plain(chunk)))
            }
            cached += chunks
        }
        let journal = try #require(try LogFile.readRecords(path))
        #expect(Array(journal[headerSize...]) == expectedJournal)

        var withBytes = OutboxWindow(session: outbox.session, pending: [])
        var without = OutboxWindow(session: outbox.session, pending: [])
        _ = withBytes.resumedOutgoing(delivered: 0, now: 0)
        _ = without.resumedOutgoing(delivered: 0, now: 0)
        let sent = withBytes.appendOutgoing(contentsOf: cached)
        let reference = without.appendOutgoing(contentsOf: cached.map(Self.plain))
        #expect(sent.count == reference.count && sent.count > 1)
        for (item, plainItem) in zip(sent, reference) {
            let bytes = item.plaintext
            let old = try #require(plainItem.message)
            #expect(bytes == plainItem.plaintext)
            #expect(bytes == MessageCodec.encode(old))
            #expect(bytes == MessageCodec.json(old).encoded())
            #expect(try MessageCodec.decode(bytes) == old)
        }
        #expect(reference.compactMap(\.message).flatMap(\.carriedChunks) == cached.map(Self.plain))
        // The window keeps the fields only: the cached bytes went out with the messages.
        #expect(withBytes.pending.allSatisfy { $0.encoded == nil })
        #expect(withBytes.pending == cached)
    }

    @Test("a line alone: its record and its one `chunk` message unchanged")
    func aLineAloneIsByteIdentical() throws {
        defer { cleanup() }
        var generator = SystemRandomNumberGenerator()
        let outbox = try Outbox(home: home, desktop: device)
        try outbox.reserve(through: 1)  // its record first: every chunk below is covered (`Outbox`: Reservations)
        var window = OutboxWindow(session: outbox.session, pending: [])
        _ = window.resumedOutgoing(delivered: 0, now: 0)
        var expectedJournal = try #require(try LogFile.readRecords(path))
        for _ in 0..<300 {
            let chunk = try outbox.append(text: Self.randomText(&generator))
            #expect(chunk.encoded != nil)
            expectedJournal += Self.oldRecord(chunk)
            #expect(window.sendsNextAlone)
            let bytes = window.appendAloneEncoded(chunk)
            let old = Message.chunk(session: outbox.session, Self.plain(chunk))
            #expect(bytes == MessageCodec.encode(old))
            #expect(bytes == MessageCodec.json(old).encoded())
        }
        #expect(try LogFile.readRecords(path) == expectedJournal)
        #expect(window.pending.allSatisfy { $0.encoded == nil })
    }

    @Test("a chunk changed after journaling is encoded from its new fields")
    func changedChunkDropsItsBytes() throws {
        defer { cleanup() }
        let outbox = try Outbox(home: home, desktop: device)
        for change in [{ (c: inout Chunk) in c.text = "other \"text\"" }, { $0.seq += 1 }, { $0.final = false },
                       { $0.lang = "en" }, { $0.speaker = "A" }, { $0.start = 1.5 }, { $0.end = 2 }] {
            var chunk = try outbox.append(text: "first")
            change(&chunk)
            #expect(chunk.encoded == nil)
            let message = Message.chunks(session: outbox.session, [chunk])
            #expect(MessageCodec.encode(message) == MessageCodec.json(message).encoded())
        }
    }
}

/// The encoded bytes a window keeps for chunks not sent yet are bounded (`maxEncodedBytes`): a backlog the desktop
/// does not take holds its texts and at most that much more; what goes out is the same either way.
@Suite("Chunks: the window's encoded bytes are bounded")
struct ChunkEncodedBoundTests: JournalFixture {
    let root = "/tmp/sb-chunk-bound-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    @Test("away: bytes kept up to the bound; resumed: the same messages; sent or dropped: nothing kept")
    func backlogKeepsAtMostTheBound() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let outbox = try Outbox(home: home, desktop: device)
        var window = OutboxWindow(session: outbox.session, pending: [], maxInFlight: 50, maxEncodedBytes: 10_000)
        var plainWindow = OutboxWindow(session: outbox.session, pending: [], maxInFlight: 50)
        var all: [Chunk] = []
        for round in 0..<20 {
            let chunks = try outbox.append(texts: (0..<10).map { "round \(round) line \($0) \u{1} \"quoted\"" })
            all += chunks
            #expect(window.appendOutgoing(contentsOf: chunks).isEmpty)  // not resumed: nothing goes out
            _ = plainWindow.appendOutgoing(contentsOf: chunks.map(ChunkEncodedOnceTests.plain))
            #expect(window.encodedBytes <= 10_000)
        }
        let kept = window.storage.filter { $0.encoded != nil }
        #expect(!kept.isEmpty && kept.count < all.count)
        #expect(window.encodedBytes == kept.reduce(0) { $0 + $1.encoded!.count })
        // The desktop claims 15 it was never sent (PROTOCOL.md: believed only through what was sent, here nothing);
        // 50 go out now, in the same bytes as without any kept encoding.
        let sent = window.resumedOutgoing(delivered: all[14].seq, now: 0)
        let reference = plainWindow.resumedOutgoing(delivered: all[14].seq, now: 0)
        #expect(window.acked == 0)
        #expect(!sent.isEmpty && sent.map(\.plaintext) == reference.map(\.plaintext))
        #expect(window.encodedBytes == window.storage.filter { $0.encoded != nil }.reduce(0) { $0 + $1.encoded!.count })
        // Everything acknowledged and sent: nothing kept, nothing counted. Each ack is believed through what was
        // sent, and frees room for the next 50.
        for step in 1...5 {
            let messages = window.ackOutgoing(all.last!.seq, now: Double(step))
            let referenceMessages = plainWindow.ackOutgoing(all.last!.seq, now: Double(step))
            #expect(messages.map(\.plaintext) == referenceMessages.map(\.plaintext))
        }
        #expect(window.isDrained && window.encodedBytes == 0)
    }

    @Test("a resume that names unsent chunks: believed only through what was sent; all go out, their bytes with them")
    func resumePastUnsentChunks() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let outbox = try Outbox(home: home, desktop: device)
        var window = OutboxWindow(session: outbox.session, pending: [])
        let chunks = try outbox.append(texts: (0..<30).map { "line \($0)" })
        _ = window.appendOutgoing(contentsOf: chunks)
        #expect(window.encodedBytes == chunks.reduce(0) { $0 + $1.encoded!.count })
        _ = window.resumedOutgoing(delivered: chunks[19].seq, now: 0)  // none sent yet: none dropped, 30 sent now
        #expect(window.acked == 0)
        #expect(window.encodedBytes == 0)
        #expect(window.storage.allSatisfy { $0.encoded == nil })
    }
}

extension OutboxWindow.Outgoing {
    /// The plaintext that is sealed: an encoded batch as it is, a message encoded.
    var plaintext: [UInt8] {
        switch self {
        case .message(let message): MessageCodec.encode(message)
        case .encoded(let bytes): bytes
        }
    }
}

extension Message {
    /// The chunks a `chunk` or `chunks` message carries.
    var carriedChunks: [Chunk] {
        switch self {
        case .chunk(_, let chunk): [chunk]
        case .chunks(_, let chunks): chunks
        default: []
        }
    }
}
