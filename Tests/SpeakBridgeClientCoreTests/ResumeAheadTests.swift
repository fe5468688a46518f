import SpeakBridgeClientCore
import SpeakBridgeProtocol
import Testing

/// A run's first connection sends its chunks right behind its `resume`, without waiting for the answer (one round
/// trip less for a one-shot `send --text` and for a streaming `send`'s first line), when none of them can have gone
/// out before; otherwise the client waits for the answer, which says what to resend (PROTOCOL.md, "Client rules").
@Suite("ClientCore: chunks behind the resume")
struct ResumeAheadTests {
    @Test("fresh lines go right behind the resume; the answer resends nothing; every line once, exit 0")
    func freshLinesGoBeforeTheAnswer() {
        let bench = Bench()
        bench.append(ClientCoreTests.texts(1...3))
        bench.holdAnswers = true
        bench.send(.start)
        #expect(bench.established)
        #expect(bench.chunksOnTheWire == 3, "sent before any answer to the resume")
        #expect(bench.received.map(\.seq) == [1, 2, 3])
        bench.append(ClientCoreTests.texts(4...4))  // a line read meanwhile goes at once too
        #expect(bench.chunksOnTheWire == 4)
        bench.releaseAnswers()
        #expect(bench.chunksOnTheWire == 4, "the resume answer resent what was already on its way")
        #expect(bench.journalAcked == 4)
        bench.send(.inputEnded)
        #expect(bench.exitCode == 0)
        #expect(bench.received.map(\.seq) == [1, 2, 3, 4])
    }

    @Test("a streaming send's first line, read after the connection opened, goes before the resume answer")
    func firstLineAfterConnecting() {
        let bench = Bench()
        bench.holdAnswers = true
        bench.send(.start)
        #expect(bench.established)
        bench.append(ClientCoreTests.texts(1...1))
        #expect(bench.chunksOnTheWire == 1)
        bench.releaseAnswers()
        #expect(bench.journalAcked == 1)
    }

    @Test("lines held from an earlier run wait for the answer, which drops what the desktop has")
    func heldLinesWaitForTheAnswer() {
        let bench = Bench(pending: ClientCoreTests.chunks(1...3))
        bench.ledger["s-bench"] = 2
        bench.received = Array(ClientCoreTests.chunks(1...2))
        bench.holdAnswers = true
        bench.send(.start)
        #expect(bench.established)
        #expect(bench.chunksOnTheWire == 0, "sent before the answer although an earlier run may have sent them")
        bench.releaseAnswers()
        #expect(bench.chunksOnTheWire == 1, "only 3: the desktop has 1 and 2")
        #expect(bench.received.map(\.seq) == [1, 2, 3])
        #expect(bench.journalAcked == 3)
    }

    @Test("after a lost connection, what was in flight waits for the new connection's answer")
    func inFlightWaitsAfterALoss() {
        let bench = Bench()
        bench.send(.start)
        bench.autoAck = false
        bench.append(ClientCoreTests.texts(1...2))
        #expect(bench.chunksOnTheWire == 2)
        bench.dropAll()
        bench.autoAck = true
        bench.holdAnswers = true
        bench.advance(to: 0.25)
        #expect(bench.established)
        #expect(bench.chunksOnTheWire == 2, "resent before the answer")
        bench.releaseAnswers()
        #expect(bench.chunksOnTheWire == 2, "the desktop had both: nothing resent")
        #expect(bench.journalAcked == 2)
        #expect(bench.received.map(\.seq) == [1, 2])
    }
}
