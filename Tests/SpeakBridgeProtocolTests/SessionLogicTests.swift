import Testing
@testable import SpeakBridgeProtocol

@Suite("Exactly-once sequencing")
struct SessionLogicTests {
    func chunks(_ range: ClosedRange<UInt64>) -> [Chunk] { range.map { Chunk(seq: $0, text: "line \($0)") } }

    @Test func ledgerAcceptsInOrderAndDropsDuplicates() {
        var ledger = SessionLedger()
        #expect(ledger.offer(session: "s", chunks: chunks(1...3)).accepted.map(\.seq) == [1, 2, 3])
        let again = ledger.offer(session: "s", chunks: chunks(2...5))
        #expect(again.accepted.map(\.seq) == [4, 5])
        #expect(again.duplicates == 2)
        #expect(again.immediateAck == nil)  // 4 and 5 are not delivered yet
        let moved = ledger.markDelivered(session: "s", through: 5)
        let movedBack = ledger.markDelivered(session: "s", through: 4)
        #expect(moved)
        #expect(!movedBack)
        let dup = ledger.offer(session: "s", chunks: chunks(1...5))
        #expect(dup.accepted.isEmpty)
        #expect(dup.immediateAck == 5)  // all durable already: ack at once so the client drops them
    }

    @Test func ledgerSessionsAreIndependent() {
        var ledger = SessionLedger()
        _ = ledger.offer(session: "a", chunks: chunks(1...3))
        #expect(ledger.offer(session: "b", chunks: chunks(1...2)).accepted.count == 2)
    }

    @Test func ledgerRestoresFromDurableState() {
        var ledger = SessionLedger()
        ledger.restore(session: "s", delivered: 10)
        #expect(ledger.offer(session: "s", chunks: chunks(9...12)).accepted.map(\.seq) == [11, 12])
    }

    @Test func ledgerAcceptsAForwardJumpAfterStateLoss() {
        var ledger = SessionLedger()
        // The desktop lost its state; the client only has 50...52 left (1...49 were acknowledged before).
        #expect(ledger.offer(session: "s", chunks: chunks(50...52)).accepted.map(\.seq) == [50, 51, 52])
    }

    @Test func windowSendsOnlyAfterResumeAndDropsDelivered() {
        var w = OutboxWindow(session: "s", pending: chunks(1...5))
        #expect(w.appendOutgoing(contentsOf: [Chunk(seq: 6, text: "x")]).isEmpty)  // not resumed yet
        let first = w.resumedOutgoing(delivered: 3, now: 0).messages
        #expect(w.pending.map(\.seq) == [4, 5, 6])
        #expect(first == [.chunks(session: "s", chunks(4...5) + [Chunk(seq: 6, text: "x")])])
        #expect(w.appendOutgoing(contentsOf: [Chunk(seq: 7, text: "y")])
            == [.message(.chunk(session: "s", Chunk(seq: 7, text: "y")))])
        _ = w.ackOutgoing(6, now: 1)
        #expect(w.pending.map(\.seq) == [7])
        _ = w.ackOutgoing(7, now: 1)
        #expect(w.isDrained)
    }

    @Test func windowResendsEverythingUnackedAfterReconnect() {
        var w = OutboxWindow(session: "s", pending: [])
        _ = w.resumedOutgoing(delivered: 0, now: 0)
        for seq in UInt64(1)...4 { _ = w.appendOutgoing(contentsOf: [Chunk(seq: seq, text: "t")]) }
        _ = w.ackOutgoing(2, now: 1)
        w.connectionLost()
        #expect(w.appendOutgoing(contentsOf: [Chunk(seq: 5, text: "t")]).isEmpty)
        // The desktop had delivered 3 before the connection dropped (the ack was lost).
        let resent = w.resumedOutgoing(delivered: 3, now: 2).messages
        #expect(resent == [.chunks(session: "s", [Chunk(seq: 4, text: "t"), Chunk(seq: 5, text: "t")])])
    }

    @Test func windowLimitsInFlight() {
        var w = OutboxWindow(session: "s", pending: chunks(1...10), maxInFlight: 4)
        let sent = w.resumedOutgoing(delivered: 0, now: 0).messages
        #expect(sent.flatMap(\.chunkSeqs) == [1, 2, 3, 4])
        let more = w.ackOutgoing(2, now: 1).messages
        #expect(more.flatMap(\.chunkSeqs) == [5, 6])
    }

    @Test func windowBatchesFitOneFrame() {
        let big = String(repeating: "é", count: 8_000)  // 16,000 bytes each
        var w = OutboxWindow(session: "s", pending: (1...10).map { Chunk(seq: UInt64($0), text: big) })
        let outgoing = w.resumedOutgoing(delivered: 0, now: 0)
        #expect(outgoing.messages.flatMap(\.chunkSeqs) == Array(1...10))
        for item in outgoing {
            #expect(item.plaintext.count + 16 <= SpeakBridgeProtocol.maxFrameSize)
        }
    }

    @Test func windowKeepsOrderAcrossCompactionInALongBurst() {
        var w = OutboxWindow(session: "s", pending: [], maxInFlight: 1_000)
        _ = w.resumedOutgoing(delivered: 0, now: 0)
        var sent: [UInt64] = []
        sent += w.appendOutgoing(contentsOf: chunks(1...20_000)).messages.flatMap(\.chunkSeqs)
        var acked: UInt64 = 0
        while acked < 20_000 {
            acked = min(20_000, acked + 700)
            sent += w.ackOutgoing(acked, now: 1).messages.flatMap(\.chunkSeqs)
            #expect(w.pendingCount == Int(20_000 - acked))
            #expect(w.pending.first?.seq == (acked < 20_000 ? acked + 1 : nil))
        }
        #expect(sent == Array(1...20_000))  // every chunk sent once, in order, across many compactions
        #expect(w.isDrained)
    }

    @Test("stall detection with a manual clock")
    func stall() {
        var w = OutboxWindow(session: "s", pending: chunks(1...3), ackTimeout: 15)
        #expect(!w.isStalled(now: 100))           // not connected: nothing in flight
        _ = w.resumedOutgoing(delivered: 0, now: 0)
        #expect(!w.isStalled(now: 14.9))
        #expect(w.isStalled(now: 15.1))
        _ = w.ackOutgoing(1, now: 15.2)
        #expect(!w.isStalled(now: 30))
        #expect(w.isStalled(now: 30.3))
        _ = w.ackOutgoing(3, now: 31)
        #expect(!w.isStalled(now: 1_000))          // drained: nothing in flight
    }
}

extension Message {
    var chunkSeqs: [UInt64] {
        switch self {
        case .chunk(_, let c): return [c.seq]
        case .chunks(_, let cs): return cs.map(\.seq)
        default: return []
        }
    }
}

extension Array where Element == OutboxWindow.Outgoing {
    /// What the window sent, as messages (an encoded batch decoded; one that does not decode is an issue).
    var messages: [Message] {
        compactMap { item in
            guard let message = item.message else {
                Issue.record("an encoded batch that does not decode")
                return nil
            }
            return message
        }
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
