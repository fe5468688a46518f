import Testing
@testable import SpeakBridgeProtocol

/// `OutboxWindow.dropThrough` finds the acknowledged prefix by binary search: exact for any ascending sequence
/// numbers, with gaps (a journal may hold them) or without.
@Suite struct OutboxWindowDropTests {
    @Test func acksDropExactlyThePrefixThroughTheirSeq() {
        let seqs: [UInt64] = [1, 2, 5, 7, 8, 20]
        for ack in UInt64(0)...25 {
            var window = OutboxWindow(session: "s", pending: seqs.map { Chunk(seq: $0, text: "t\($0)") })
            _ = window.resumedOutgoing(delivered: 0, now: 0)
            _ = window.ackOutgoing(ack, now: 1)
            #expect(window.pending.map(\.seq) == seqs.filter { $0 > ack }, "ack \(ack)")
            #expect(window.acked == min(ack, 20))
        }
        var window = OutboxWindow(session: "s", pending: (1...1_000).map { Chunk(seq: $0, text: "x") })
        _ = window.resumedOutgoing(delivered: 0, now: 0)
        for ack in stride(from: UInt64(7), through: 1_000, by: 7) {
            _ = window.ackOutgoing(ack, now: 1)
            #expect(window.pending.first?.seq == (ack < 1_000 ? ack + 1 : nil))
        }
    }
}
