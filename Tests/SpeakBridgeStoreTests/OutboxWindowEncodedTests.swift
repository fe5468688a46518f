#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
@testable import SpeakBridgeProtocol
import Testing
@testable import SpeakBridgeStore

/// The window's encoded batches (`OutboxWindow+Encoded.swift`) against the `[Message]` path the tests keep as their
/// reference (`OutboxWindowReference.swift`): on random runs of journaled chunks (with their encoded bytes, some
/// without, some with the rare members), appends, acks, lost connections and resumes, both windows send the same
/// messages in the same order, each encoded batch is byte for byte `MessageCodec.encode` of the message the other
/// window made, and both end in the same state.
@Suite("OutboxWindow: encoded batches are the messages' bytes")
struct OutboxWindowEncodedTests {
    let root = "/tmp/sb-window-encoded-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    var home: Home { Home.resolve(override: root, environment: [:]) }
    let device = DeviceID(publicKeyDigest: SHA256.hash(Array("desk".utf8)))

    static func same(_ a: OutboxWindow, _ b: OutboxWindow) -> Bool {
        a.pending == b.pending && a.acked == b.acked && a.lastSeq == b.lastSeq && a.nextToSend == b.nextToSend
            && a.sentCount == b.sentCount && a.encodedBytes == b.encodedBytes
            && zip(a.storage, b.storage).allSatisfy { $0.encoded == $1.encoded }
    }

    /// What `outgoing` sends, checked against `messages`: the same count, the same messages, and the same bytes.
    static func check(_ outgoing: [OutboxWindow.Outgoing], _ messages: [Message]) -> Bool {
        guard outgoing.count == messages.count else { return false }
        for (item, message) in zip(outgoing, messages) {
            switch item {
            case .message(let m):
                guard m == message, MessageCodec.encode(m) == MessageCodec.encode(message) else { return false }
            case .encoded(let bytes):
                guard case .chunks = message, bytes == MessageCodec.encode(message),
                      bytes.count <= SpeakBridgeProtocol.maxFrameSize - 16 else { return false }
            }
        }
        return true
    }

    static func randomChunks(_ outbox: Outbox, _ generator: inout some RandomNumberGenerator) throws -> [Chunk] {
        let palette = ChunkEncodedOnceTests.palette
        let texts = (0..<Int.random(in: 1...120, using: &generator)).map { _ in
            Int.random(in: 0..<40, using: &generator) == 0
                ? String(repeating: "\u{85}", count: Int.random(in: 1_000...4_000, using: &generator))  // big escapes
                : (0..<Int.random(in: 0...30, using: &generator)).map { _ in palette.randomElement(using: &generator)! }
                    .joined()
        }
        var chunks = try outbox.append(texts: texts)
        for i in chunks.indices where Int.random(in: 0..<8, using: &generator) == 0 {
            // Changed after journaling (no encoded bytes), some with rare members.
            if Bool.random(using: &generator) { chunks[i].lang = "fr" } else { chunks[i].final = false }
        }
        return chunks
    }

    @Test("random appends, acks, losses and resumes: the same messages, the same bytes, the same state")
    func sameAsMessages() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        var generator = SystemRandomNumberGenerator()
        var batches = 0
        for round in 0..<6 {
            let outbox = try Outbox(home: home, desktop: device)
            let maxInFlight = [4_096, 700, 37, 1][round % 4]
            let bound = round == 5 ? 20_000 : 16 << 20
            var encoded = OutboxWindow(session: outbox.session, pending: [], maxInFlight: maxInFlight,
                                       maxEncodedBytes: bound)
            var reference = OutboxWindow(session: outbox.session, pending: [], maxInFlight: maxInFlight,
                                         maxEncodedBytes: bound)
            #expect(encoded.resumedOutgoing(delivered: 0, now: 0).isEmpty)
            _ = reference.resumed(delivered: 0, now: 0)
            for _ in 0..<30 {
                switch Int.random(in: 0..<10, using: &generator) {
                case 0..<5:
                    let chunks = try Self.randomChunks(outbox, &generator)
                    let outgoing = encoded.appendOutgoing(contentsOf: chunks)
                    #expect(Self.check(outgoing, reference.append(contentsOf: chunks)))
                    batches += outgoing.filter { if case .encoded = $0 { true } else { false } }.count
                case 5..<8:
                    let upTo = reference.lastSeq
                    let span = max(1, upTo - reference.acked + 2)
                    let seq = reference.acked + UInt64.random(in: 0...span, using: &generator)
                    #expect(Self.check(encoded.ackOutgoing(seq, now: 1), reference.ack(seq, now: 1)))
                case 8:
                    encoded.connectionLost()
                    reference.connectionLost()
                default:
                    let delivered = reference.acked + UInt64.random(in: 0...3, using: &generator)
                    #expect(Self.check(encoded.resumedOutgoing(delivered: delivered, now: 2),
                                       reference.resumed(delivered: delivered, now: 2)))
                }
                #expect(Self.same(encoded, reference))
            }
            try outbox.markAcked(outbox.nextSeq - 1)
        }
        #expect(batches > 0)
    }

    @Test("a batch cut by the frame size or the window to one chunk goes as that chunk's message")
    func loneChunkIsItsMessage() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let outbox = try Outbox(home: home, desktop: device)
        let a = String(repeating: "\u{85}", count: 4_000)  // 24,000 bytes of JSON: two fit a frame, not three
        let c = String(repeating: "\u{85}", count: 8_000)  // 48,000: not with an `a`
        let chunks = try outbox.append(texts: [a, a, c, a, "small"])
        var window = OutboxWindow(session: outbox.session, pending: [], maxInFlight: 4)
        var reference = window
        _ = window.resumedOutgoing(delivered: 0, now: 0)
        _ = reference.resumed(delivered: 0, now: 0)
        let outgoing = window.appendOutgoing(contentsOf: chunks)
        let messages = reference.append(contentsOf: chunks)
        #expect(Self.check(outgoing, messages))
        // [a, a] as a batch; c alone (the next would not fit); a alone (the window is full after it).
        #expect(outgoing.count == 3 && messages.count == 3)
        if case .encoded = outgoing[0] {} else { Issue.record("the first two go as one encoded batch") }
        #expect(outgoing[1] == .message(.chunk(session: outbox.session, chunks[2])))
        #expect(outgoing[2] == .message(.chunk(session: outbox.session, chunks[3])))
        #expect(outgoing.map(\.message) == messages.map { Optional($0) })
        #expect(Self.same(window, reference))
    }

    @Test("a line alone: appendAloneEncoded is appendAlone's message, byte for byte, and the same window after")
    func aloneEncodedIsTheMessage() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        var generator = SystemRandomNumberGenerator()
        let outbox = try Outbox(home: home, desktop: device)
        var encoded = OutboxWindow(session: outbox.session, pending: [])
        var reference = encoded
        _ = encoded.resumedOutgoing(delivered: 0, now: 0)
        _ = reference.resumed(delivered: 0, now: 0)
        for i in 0..<300 {
            var chunk = try outbox.append(text: ChunkEncodedOnceTests.randomText(&generator))
            if i % 7 == 0 { chunk.speaker = "A \u{85}" }  // no encoded bytes, a rare member
            if i % 11 == 0 { chunk.final = false }
            #expect(encoded.sendsNextAlone && reference.sendsNextAlone)
            let bytes = encoded.appendAloneEncoded(chunk)
            let message = reference.appendAlone(chunk)
            #expect(bytes == MessageCodec.encode(message))
            #expect(bytes == MessageCodec.json(message).encoded())
            #expect(Self.same(encoded, reference))
            if i % 5 == 0 {
                #expect(encoded.ackOutgoing(chunk.seq, now: 1).isEmpty && reference.ack(chunk.seq, now: 1).isEmpty)
            }
        }
        #expect(encoded.storage.allSatisfy { $0.encoded == nil })
    }

    @Test("one chunk to send (nextOutgoing's shortcut for a paced line) is the reference loop's message, same window")
    func oneChunkShortcutIsTheLoopsMessage() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        var generator = SystemRandomNumberGenerator()
        let outbox = try Outbox(home: home, desktop: device)
        var encoded = OutboxWindow(session: outbox.session, pending: [])
        var reference = encoded
        #expect(Self.check(encoded.resumedOutgoing(delivered: 0, now: 0), reference.resumed(delivered: 0, now: 0)))
        var sentWithBytes = 0
        for i in 0..<200 {
            var chunk = try outbox.append(text: ChunkEncodedOnceTests.randomText(&generator))
            if i % 7 == 0 { chunk.lang = "fr" }  // no encoded bytes, a rare member
            if chunk.encoded != nil { sentWithBytes += 1 }
            let outgoing = encoded.appendOutgoing(contentsOf: [chunk])
            #expect(outgoing.count == 1 && Self.check(outgoing, reference.append(contentsOf: [chunk])))
            #expect(Self.same(encoded, reference))
            if i % 3 == 0 {
                // Lost before its ack: the one unacknowledged chunk goes again, alone, on the next connection.
                encoded.connectionLost()
                reference.connectionLost()
                let delivered = encoded.acked
                #expect(Self.check(encoded.resumedOutgoing(delivered: delivered, now: 2),
                                   reference.resumed(delivered: delivered, now: 2)))
                #expect(Self.same(encoded, reference))
            }
            #expect(Self.check(encoded.ackOutgoing(chunk.seq, now: 1), reference.ack(chunk.seq, now: 1)))
        }
        #expect(sentWithBytes > 0 && encoded.encodedBytes == 0 && encoded.isDrained)
    }
}
