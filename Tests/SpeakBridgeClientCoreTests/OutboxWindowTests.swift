import SpeakBridgeProtocol
import Testing

/// The window on its `Deque`: what the client sends next, and what it believes of the desktop's acks.
@Suite("OutboxWindow")
struct OutboxWindowTests {
    static func chunks(_ range: ClosedRange<Int>) -> [Chunk] { range.map { Chunk(seq: UInt64($0), text: "line \($0)") } }

    /// The sequence numbers of what the window sent, in order (an encoded batch decoded).
    static func seqs(_ outgoing: [OutboxWindow.Outgoing]) -> [UInt64] {
        outgoing.flatMap { item -> [UInt64] in
            guard let message = item.message else {
                Issue.record("an encoded batch that does not decode")
                return []
            }
            return switch message {
            case .chunk(_, let c): [c.seq]
            case .chunks(_, let cs): cs.map(\.seq)
            default: []
            }
        }
    }

    @Test("an ack past every line ever held is believed only up to the last one (it was never sent)")
    func ackPastTheEnd() {
        var w = OutboxWindow(session: "s", pending: Self.chunks(1...2))
        _ = w.resumedOutgoing(delivered: 0, now: 0)
        _ = w.ackOutgoing(1_000, now: 1)
        #expect(w.acked == 2)
        #expect(w.isDrained)
        // The next line (seq 3, as the journal numbers it) is sent, not taken as acknowledged.
        #expect(Self.seqs(w.appendOutgoing(contentsOf: [Chunk(seq: 3, text: "three")])) == [3])
        #expect(w.pendingCount == 1)
    }

    /// PROTOCOL.md: a chunk not sent is never counted as delivered. Chunks behind `maxInFlight` are held, not sent:
    /// an ack through them is believed only through the last one sent. Before, it was believed through the last
    /// one held, and those lines left the journal without ever going out.
    @Test("an ack past the chunks sent, with more held behind the in-flight bound: clamped to the last sent")
    func ackPastTheSentChunks() {
        var w = OutboxWindow(session: "s", pending: [], maxInFlight: 2)
        _ = w.resumedOutgoing(delivered: 0, now: 0)
        #expect(Self.seqs(w.appendOutgoing(contentsOf: Self.chunks(1...4))) == [1, 2])
        _ = w.ackOutgoing(4, now: 1)
        #expect(w.acked == 2)
        #expect(w.pendingCount == 2)
        // What was held at the start (an earlier run may have sent it) is believed before anything went out.
        var restarted = OutboxWindow(session: "s", pending: Self.chunks(1...3), maxInFlight: 1)
        _ = restarted.ackOutgoing(3, now: 0)
        #expect(restarted.acked == 3)
    }

    @Test("resume with more than was held: the same clamp")
    func resumePastTheEnd() {
        var w = OutboxWindow(session: "s", pending: Self.chunks(1...3), acked: 0)
        _ = w.resumedOutgoing(delivered: 50, now: 0)
        #expect(w.acked == 3)
    }

    @Test("100,000 lines acked one by one: each goes once, in order, and the window empties")
    func manyAcks() {
        var w = OutboxWindow(session: "s", pending: [], maxInFlight: 64)
        var sent = Self.seqs(w.resumedOutgoing(delivered: 0, now: 0))
        sent += Self.seqs(w.appendOutgoing(contentsOf: (1...100_000).map { Chunk(seq: UInt64($0), text: "x") }))
        var seq: UInt64 = 0
        while seq < 100_000 {
            seq += 1
            sent += Self.seqs(w.ackOutgoing(seq, now: 1))
        }
        #expect(sent == Array(1...100_000))
        #expect(w.isDrained)
        #expect(w.acked == 100_000)
    }

    @Test("a new connection sends nothing until resumed, then resends what was in flight")
    func reconnect() {
        var w = OutboxWindow(session: "s", pending: Self.chunks(1...3))
        #expect(Self.seqs(w.appendOutgoing(contentsOf: [Chunk(seq: 4, text: "4")])).isEmpty)
        #expect(Self.seqs(w.resumedOutgoing(delivered: 1, now: 0)) == [2, 3, 4])
        w.connectionLost()
        #expect(Self.seqs(w.ackOutgoing(2, now: 1)).isEmpty)
        #expect(Self.seqs(w.resumedOutgoing(delivered: 3, now: 2)) == [4])
    }
}
