import SpeakBridgeClientCore
import SpeakBridgeProtocol
import Testing

/// The desktop has more of the session than the journal (a crash of the client's machine lost records of chunks
/// the desktop had acknowledged): lines read since are renumbered after the desktop's `delivered`, never dropped as
/// duplicates (OutboxWindow+Renumber.swift).
@Suite("ClientCore: a journal behind the desktop")
struct RenumberTests {
    @Test("lines read after the journal lost acknowledged records reach the desktop, numbered after what it has")
    func linesAfterALostTail() {
        // The journal kept chunks 1…2 (unacknowledged); the desktop has 1…5: 3…5 were sent and acknowledged before
        // a crash of this machine, and their records never reached the disk.
        let bench = Bench(pending: ClientCoreTests.chunks(1...2))
        bench.ledger["s-bench"] = 5
        bench.received = ClientCoreTests.chunks(1...5)
        bench.append(["read offline"])  // numbered 3 by the journal, before the desktop answered
        bench.send(.start)
        #expect(bench.renumbers.map(\.after) == [2])
        #expect(bench.renumbers.map(\.by) == [3])
        #expect(bench.received.map(\.seq) == [1, 2, 3, 4, 5, 6])
        #expect(bench.received.last?.text == "read offline")
        #expect(bench.warnings.contains { $0.contains("3 more lines") && $0.contains("1 line(s) read since") })
        bench.append(["next"])
        #expect(bench.received.last.map { ($0.seq, $0.text) } ?? (0, "") == (7, "next"))
        bench.send(.inputEnded)
        #expect(bench.exitCode == 0)
        #expect(bench.core.window.isDrained)
        #expect(bench.journalAcked == 7)
        #expect(bench.core.acknowledgedThisRun == 4)  // 1, 2, "read offline" and "next"; 3…5 were an earlier run's
    }

    @Test("nothing read since: the window only moves up, and new lines follow the desktop's level")
    func nothingUnsent() {
        let bench = Bench(acked: 2)
        bench.ledger["s-bench"] = 4
        bench.send(.start)
        #expect(bench.renumbers.map(\.by) == [2])
        #expect(bench.core.window.lastSeq == 4)
        bench.append(["after"])
        #expect(bench.received.map(\.seq) == [5])
    }

    @Test("a desktop at or below what was sent: no renumbering")
    func noRenumberWhenBehind() {
        let bench = Bench(pending: ClientCoreTests.chunks(1...4))
        bench.ledger["s-bench"] = 4
        bench.received = ClientCoreTests.chunks(1...4)
        bench.append(["five"])
        bench.send(.start)
        #expect(bench.renumbers.isEmpty)
        #expect(bench.received.map(\.seq) == [1, 2, 3, 4, 5])
        #expect(bench.warnings.isEmpty)
    }

    @Test("only unsent chunks move: a resume on a later connection keeps what went out on the first")
    func sentChunksKeepTheirNumbers() {
        let bench = Bench()
        bench.send(.start)
        bench.autoAck = false
        bench.append(["one", "two"])  // sent, not acknowledged
        bench.dropAll()
        bench.ledger["s-bench"] = 2  // the desktop took both
        bench.autoAck = true
        bench.advance(to: 0.25)  // redialled: resume says 2, which was sent: nothing to renumber
        #expect(bench.established)
        #expect(bench.renumbers.isEmpty)
        #expect(bench.core.window.isDrained)
    }

    @Test("a resume answer no renumbering can follow (past 2^53, the largest sequence number) is an error, and nothing is dropped")
    func absurdDelivered() {
        let bench = Bench(pending: ClientCoreTests.chunks(1...2))
        bench.ledger["s-bench"] = 1 << 53  // valid, but 3 would become 2^53 + 1
        bench.append(["three"])
        bench.send(.start)
        #expect(bench.exitCode == 1)
        #expect(bench.errors.contains { $0.0.contains("more than this device could have sent") })
        #expect(bench.core.window.pending.map(\.seq) == [1, 2, 3])
        #expect(bench.received.isEmpty)
    }
}
