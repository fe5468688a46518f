import SpeakBridgeProtocol
import SpeakBridgeTestSupport
import Testing

/// The window's second bound: at most `maxInFlightBytes` of text in flight (but always one chunk), so that a desktop
/// that stops reading cannot make a sender hold 16,384 long lines' frames.
@Suite("OutboxWindow: bytes in flight")
struct OutboxWindowBytesTests {
    static func seqs(_ outgoing: [OutboxWindow.Outgoing]) -> [UInt64] { OutboxWindowTests.seqs(outgoing) }

    static func line(_ seq: Int, bytes: Int) -> Chunk { Chunk(seq: UInt64(seq), text: String(repeating: "w", count: bytes)) }

    @Test("chunks go out up to the byte bound; each ack lets out what fits again; a chunk alone always goes")
    func byteBound() {
        var w = OutboxWindow(session: "s", pending: [], maxInFlight: 1_000, maxInFlightBytes: 1_000)
        _ = w.resumedOutgoing(delivered: 0, now: 0)
        // 300-byte lines: three fit (900), the fourth would make 1,200.
        #expect(Self.seqs(w.appendOutgoing(contentsOf: (1...10).map { Self.line($0, bytes: 300) })) == [1, 2, 3])
        #expect(Self.seqs(w.ackOutgoing(1, now: 1)) == [4])
        #expect(Self.seqs(w.ackOutgoing(3, now: 1)) == [5, 6])
        // A line alone (the paced path) waits too while the bound is reached.
        #expect(Self.seqs(w.ackOutgoing(6, now: 1)) == [7, 8, 9])
        #expect(!w.sendsNextAlone)
        // A chunk larger than the bound goes when nothing else is in flight, and alone.
        #expect(Self.seqs(w.appendOutgoing(contentsOf: [Self.line(11, bytes: 5_000), Self.line(12, bytes: 1)])) == [])
        #expect(Self.seqs(w.ackOutgoing(9, now: 1)) == [10])
        #expect(Self.seqs(w.ackOutgoing(10, now: 1)) == [11])
        #expect(Self.seqs(w.ackOutgoing(11, now: 1)) == [12])
        #expect(w.sendsNextAlone)
        #expect(Self.seqs(w.ackOutgoing(12, now: 1)) == [] && w.isDrained)
    }

    @Test("a lost connection and a resume start the count again: what was in flight goes out again within the bound")
    func reconnectResetsTheCount() {
        var w = OutboxWindow(session: "s", pending: (1...6).map { Self.line($0, bytes: 400) }, maxInFlight: 100,
                             maxInFlightBytes: 1_000)
        #expect(Self.seqs(w.resumedOutgoing(delivered: 0, now: 0)) == [1, 2])
        w.connectionLost()
        #expect(Self.seqs(w.resumedOutgoing(delivered: 1, now: 1)) == [2, 3])
        #expect(Self.seqs(w.ackOutgoing(3, now: 2)) == [4, 5])
    }

    @Test("random lines, acks and reconnects: each chunk goes out in order, the bounds hold, nothing is lost")
    func randomOperations() {
        var rng = SplitMix64(seed: 0xB17E5)
        for _ in 0..<40 {
            let maxBytes = Int.random(in: 1...3_000, using: &rng)
            let maxChunks = Int.random(in: 1...50, using: &rng)
            var w = OutboxWindow(session: "s", pending: [], maxInFlight: maxChunks, maxInFlightBytes: maxBytes)
            var sizes: [UInt64: Int] = [:]
            var inFlight: [UInt64] = []  // in order, as sent on this connection
            var next: UInt64 = 1
            var delivered: UInt64 = 0
            var connected = true
            inFlight += Self.seqs(w.resumedOutgoing(delivered: 0, now: 0))
            func check(_ sent: [UInt64]) {
                inFlight += sent
                let bytes = inFlight.reduce(0) { $0 + sizes[$1]! }
                #expect(inFlight.count <= maxChunks)
                #expect(inFlight.count <= 1 || bytes <= maxBytes, "\(bytes) bytes in flight, bound \(maxBytes)")
                #expect(inFlight == inFlight.sorted() && Set(inFlight).count == inFlight.count)
            }
            for _ in 0..<300 {
                switch Int.random(in: 0..<10, using: &rng) {
                case 0..<5:
                    let lines = (0..<Int.random(in: 1...6, using: &rng)).map { _ -> Chunk in
                        let size = Int.random(in: 1...800, using: &rng)
                        sizes[next] = size
                        defer { next += 1 }
                        return Self.line(Int(next), bytes: size)
                    }
                    let sent = Self.seqs(w.appendOutgoing(contentsOf: lines))
                    check(connected ? sent : [])
                case 5..<8 where connected && !inFlight.isEmpty:
                    let through = inFlight[Int.random(in: 0..<inFlight.count, using: &rng)]
                    delivered = max(delivered, through)
                    inFlight.removeAll { $0 <= through }
                    check(Self.seqs(w.ackOutgoing(through, now: 1)))
                case 8:
                    w.connectionLost()
                    connected = false
                    inFlight = []
                default:
                    connected = true
                    inFlight = []
                    check(Self.seqs(w.resumedOutgoing(delivered: delivered, now: 2)))
                }
            }
            // Drained at the end: every line goes out and is acknowledged, in order.
            if !connected { inFlight = []; check(Self.seqs(w.resumedOutgoing(delivered: delivered, now: 3))) }
            var rounds = 0
            while !w.isDrained && rounds < 100_000 {
                let through = inFlight.last!
                inFlight = []
                check(Self.seqs(w.ackOutgoing(through, now: 4)))
                rounds += 1
            }
            #expect(w.isDrained && w.acked == next - 1)
        }
    }
}
