import SpeakBridgeClientCore
import SpeakBridgeProtocol
import Testing

/// `send`'s decisions, in memory against a real `ResponderMachine` with a manual clock (see `Bench`).
@Suite("ClientCore: send against a desktop in memory")
struct ClientCoreTests {
    static func texts(_ range: ClosedRange<Int>) -> [String] { range.map { "line \($0)" } }
    static func chunks(_ range: ClosedRange<Int>) -> [Chunk] { range.map { Chunk(seq: UInt64($0), text: "line \($0)") } }

    @Test("first connect: hello, resume, every line once and in order, acks journaled, bye, exit 0")
    func firstConnect() {
        let bench = Bench()
        bench.append(Self.texts(1...3))
        #expect(bench.dialed.isEmpty)  // nothing is dialed before `start`
        bench.send(.start)
        #expect(bench.established)
        #expect(bench.reports.contains(.connected("192.0.2.1:7777")))
        #expect(bench.remembered == [Bench.candidate("192.0.2.1")])
        #expect(bench.received.map(\.text) == Self.texts(1...3))
        #expect(bench.journalAcked == 3)
        bench.append(Self.texts(4...5))
        #expect(bench.received.map(\.seq) == [1, 2, 3, 4, 5])
        #expect(bench.exitCode == nil)
        bench.send(.inputEnded)
        #expect(bench.exitCode == 0)
        #expect(bench.syncs == 1)
        #expect(bench.byes == 1)
        #expect(bench.core.acknowledgedThisRun == 5)
    }

    /// Only the answer to this connection's own `resume` resends what is in flight; another `resume` (a compromised
    /// desktop that stopped reading sends them by the thousand) is an ack and nothing more. Before, each one
    /// queued the whole window again (up to 8 MiB), without bound.
    @Test("a resume the client did not ask for resends nothing and still counts as an ack")
    func anUnaskedResumeResendsNothing() {
        let bench = Bench()
        bench.holding = true  // the desktop's sinks take nothing: every line stays in flight
        bench.send(.start)
        bench.append(Self.texts(1...100))
        bench.run(until: 1)
        #expect(bench.established)
        #expect(bench.chunksOnTheWire == 100)
        for _ in 0..<10 { bench.desktopSends(.resume(session: "s-bench", delivered: 0)) }
        #expect(bench.chunksOnTheWire == 100, "resent on a resume the client did not ask for")
        bench.desktopSends(.resume(session: "s-bench", delivered: 40))
        #expect(bench.core.window.acked == 40)
        #expect(bench.chunksOnTheWire == 100)
        // A new connection's own `resume` is answered, and its answer resends the rest (41…100) once.
        bench.dropAll()
        bench.run(until: 5)
        #expect(bench.established)
        #expect(bench.chunksOnTheWire == 160)
    }

    /// A desktop that sends `error` messages without end fills the terminal or log with at most 32 lines.
    @Test("a desktop's errors are shown at most 32 times in a run")
    func desktopErrorsAreBounded() {
        let bench = Bench()
        bench.send(.start)
        #expect(bench.established)
        for _ in 0..<100 { bench.desktopSends(.error(code: .unexpected, message: "noise", expected: nil)) }
        let shown = bench.warnings.filter { $0.hasPrefix("desktop reported") }
        #expect(shown.count == 32, "\(shown.count)")
        #expect(shown.last?.hasSuffix("(further errors of the desktop are not shown)") == true)
    }

    @Test("the input ends with lines unacknowledged: exit 0 only once the last ack came")
    func waitsForLastAck() {
        let bench = Bench()
        bench.autoAck = false
        bench.send(.start)
        bench.append(Self.texts(1...2))
        bench.send(.inputEnded)
        #expect(bench.exitCode == nil)
        bench.ackAll()
        #expect(bench.exitCode == 0)
    }

    @Test("resume after reconnect starts at the desktop's delivered: nothing twice, nothing lost")
    func resumeAfterReconnect() {
        // Lines 1…5 from an earlier run; the desktop already has 1…3 (that run's acks were lost).
        let bench = Bench(pending: Self.chunks(1...5))
        bench.ledger["s-bench"] = 3
        bench.received = Array(Self.chunks(1...3))
        bench.send(.start)
        #expect(bench.received.map(\.seq) == [1, 2, 3, 4, 5])
        #expect(bench.journalAcked == 5)

        // 6 and 7 reach the desktop, their acks do not reach us: the connection breaks.
        bench.autoAck = false
        bench.append(Self.texts(6...7))
        bench.dropAll()
        #expect(!bench.established)
        #expect(bench.waits == ["connection lost: peer close 1006"])
        #expect(bench.core.window.pendingCount == 2)

        // Redialled after the 0.2 s backoff, on a tick; resume says 7: 6 and 7 are not sent again.
        bench.autoAck = true
        bench.append(Self.texts(8...8))
        bench.advance(to: 0.1)
        #expect(!bench.established)
        bench.advance(to: 0.25)
        #expect(bench.established)
        #expect(bench.received.map(\.seq) == Array(1...8))
        #expect(bench.journalAcked == 8)
        #expect(bench.core.window.isDrained)
    }

    @Test("a message the session cannot seal (a journal from an older send holds a chunk too big for a frame) closes the connection loudly instead of sending nothing until the ack timeout")
    func unsealableMessageCloses() {
        let huge = Chunk(seq: 1, text: String(repeating: "\u{1}", count: 16_384))  // 98,304 bytes as JSON
        let bench = Bench(pending: [huge])
        bench.send(.start)
        #expect(bench.reports.contains { report in
            if case .warning(let text) = report { return text.contains("closing the connection") }
            return false
        })
        #expect(!bench.established)
        #expect(bench.received.isEmpty)
    }

    @Test("acks trim the window: at most maxInFlight unacknowledged, the rest follows each ack")
    func acksTrimWindow() {
        let bench = Bench(maxInFlight: 4)
        bench.autoAck = false
        bench.send(.start)
        bench.append(Self.texts(1...10))
        #expect(bench.received.map(\.seq) == [1, 2, 3, 4])
        #expect(bench.core.window.pendingCount == 10)
        bench.ackAll()  // acks 4: 5…8 go; the bench acks only when asked
        #expect(bench.journalAcked == 4)
        #expect(bench.core.window.pendingCount == 6)
        #expect(bench.received.map(\.seq) == Array(1...8))
        bench.ackAll()
        bench.ackAll()
        #expect(bench.received.map(\.seq) == Array(1...10))
        #expect(bench.core.window.isDrained)
        #expect(bench.journalAcked == 10)
    }

    @Test("a desktop that acks past what was sent is believed only up to the last line: later lines still go")
    func ackPastTheEnd() {
        let bench = Bench()
        bench.autoAck = false
        bench.send(.start)
        bench.append(Self.texts(1...2))
        for (id, _) in bench.open { bench.ack("s-bench", through: 1_000, on: id) }
        bench.pump()
        #expect(bench.journalAcked == 2)
        bench.append(Self.texts(3...3))
        #expect(bench.received.map(\.seq) == [1, 2, 3])
        #expect(bench.core.window.pendingCount == 1)
    }

    @Test("refused three rounds in a row: exit 77 with the address, lines kept; a session in between resets")
    func refusalExit() {
        let bench = Bench()
        bench.paired = false  // revoked on the desktop
        bench.append(Self.texts(1...2))
        bench.send(.start)
        #expect(bench.exitCode == nil)
        #expect(bench.waits == ["it did not accept this device"])
        bench.run(until: 0.25)  // round 2
        #expect(bench.exitCode == nil)
        bench.run(until: 0.7)  // round 3 (backoff 0.4 s)
        #expect(bench.exitCode == 77)
        #expect(bench.syncs == 1)
        let error = bench.errors.first
        #expect(error?.0 == "the desktop \"office\" at 192.0.2.1:7777 refused this device (revoked?)")
        #expect(error?.1?.contains("the 2 queued line(s) are kept") == true)
        #expect(bench.journalAcked == 0)
    }

    @Test("refusals count only in a row: a round that reaches a session starts the count again")
    func refusalCountResets() {
        let bench = Bench()
        bench.paired = false
        bench.send(.start)
        bench.run(until: 0.25)  // two refused rounds
        bench.paired = true
        bench.run(until: 0.7)
        #expect(bench.established)
        bench.paired = false
        bench.dropAll()
        bench.run(until: 1.0)  // refused again, twice: still no 77
        #expect(bench.exitCode == nil)
    }

    /// The desktop's ID is public: anyone on the LAN can announce it over mDNS and close every handshake. Only an
    /// address that proved the key (known, `--address`) can make `send` decide it was refused. Before, three such
    /// rounds while the real desktop was away ended `send` with 77, "revoked?", even with `--timeout 0`.
    @Test("an address only announced over mDNS that refuses is not the desktop refusing: no exit 77")
    func anAnnouncedImpostorIsNotARefusal() {
        let bench = Bench(timeout: 0)
        bench.addresses["192.0.2.1"] = .dead("connection refused")  // the real desktop is asleep
        bench.addresses["192.0.2.66"] = .otherDesktop
        bench.append(Self.texts(1...2))
        bench.send(.start)
        for round in 0..<20 {
            bench.send(.found([Candidate(host: "192.0.2.66", port: 7777, source: "mDNS")]))
            bench.run(until: Double(round + 1))
        }
        #expect(bench.exitCode == nil)
        #expect(bench.dialed.filter { $0.host == "192.0.2.66" }.count >= 3)
        // The real desktop wakes: the lines go.
        bench.addresses["192.0.2.1"] = .live
        bench.run(until: 60)
        #expect(bench.received.map(\.seq) == [1, 2])
    }

    /// A peer that takes the WebSocket and never answers message 1 no longer holds the round open for ever: the
    /// attempt is closed after `LinkCore.handshakeTimeout` and the round redialled (not counted as a refusal).
    @Test("an attempt that never gets message 2 is closed after 5 s and redialled")
    func aSilentHandshakeIsAbandoned() {
        let bench = Bench()
        bench.addresses["192.0.2.1"] = .silent
        bench.append(Self.texts(1...2))
        bench.send(.start)
        bench.run(until: 4.5)
        #expect(bench.dialed.count == 1)
        bench.run(until: 6)
        #expect(bench.dialed.count >= 2)
        bench.addresses["192.0.2.1"] = .live
        bench.run(until: 30)
        #expect(bench.exitCode == nil)
        #expect(bench.received.map(\.seq) == [1, 2])
    }

    @Test("a dead address is not a refusal: unreachable rounds go on until the time limit")
    func unreachableIsNotRefused() {
        let bench = Bench()
        bench.addresses["192.0.2.1"] = .dead("connection refused")
        bench.send(.start)
        bench.run(until: 20)
        #expect(bench.exitCode == nil)
        #expect(bench.waits.first == "192.0.2.1:7777: connect failed: connection refused")
    }

    @Test("the default time limit: none while the input is open, 30 s once it ended, then exit 75")
    func defaultTimeoutAfterInputEnds() {
        let bench = Bench()
        bench.addresses["192.0.2.1"] = .dead("connection refused")
        bench.send(.start)
        bench.append(Self.texts(1...1))
        bench.run(until: 100)  // the input is still open: keep trying
        #expect(bench.exitCode == nil)
        bench.send(.inputEnded)
        bench.run(until: 129.9)
        #expect(bench.exitCode == nil)
        bench.run(until: 130.2)
        #expect(bench.exitCode == 75)
        #expect(bench.errors.first?.0 == "1 chunk(s) not acknowledged after 30 s (the desktop \"office\" was not reachable)")
        #expect(bench.syncs == 1)
    }

    @Test("an explicit --timeout counts per chunk from when it was read, even while the input is open")
    func explicitTimeout() {
        let bench = Bench(timeout: 5)
        bench.autoAck = false
        bench.send(.start)
        bench.run(until: 3)
        bench.append(Self.texts(1...1))  // read at 3 s
        bench.run(until: 7.9)
        #expect(bench.exitCode == nil)
        bench.run(until: 8.2)
        #expect(bench.exitCode == 75)
        #expect(bench.errors.first?.0 == "1 chunk(s) not acknowledged after 5 s")
    }

    @Test("no ack progress for 15 s while lines are in flight: dropped and redialled, resumed without loss")
    func ackStall() {
        let bench = Bench()
        bench.autoAck = false
        bench.send(.start)
        bench.append(Self.texts(1...2))
        bench.run(until: 14.9)
        #expect(bench.warnings.isEmpty)
        bench.run(until: 15.1)
        #expect(bench.warnings == ["no acknowledgement for 15 s; reconnecting"])
        bench.autoAck = true
        bench.run(until: 15.5)
        #expect(bench.established)
        bench.ackAll()
        #expect(bench.received.map(\.seq) == [1, 2])
        #expect(bench.journalAcked == 2)
    }

    @Test("every candidate at once: the second address wins while the first hangs, and is remembered first")
    func secondCandidateWins() {
        let bench = Bench(known: ["192.0.2.1", "192.0.2.2"])
        bench.addresses["192.0.2.1"] = .hanging
        bench.send(.start)
        #expect(bench.dialed.map(\.host) == ["192.0.2.1", "192.0.2.2"])
        #expect(bench.established)
        #expect(bench.reports.contains(.connected("192.0.2.2:7777")))
        #expect(bench.hanging.isEmpty)  // the losing attempt was closed
        #expect(bench.core.link.known.map(\.host) == ["192.0.2.2", "192.0.2.1"])
        #expect(bench.remembered == [Bench.candidate("192.0.2.2")])
    }

    @Test("an address where another desktop answers loses to the paired desktop's; alone it counts as refused")
    func otherDesktopLoses() {
        let bench = Bench(known: ["192.0.2.1"], extra: ["192.0.2.9"])
        bench.addresses["192.0.2.1"] = .otherDesktop
        bench.send(.start)
        #expect(bench.established)
        #expect(bench.reports.contains(.connected("192.0.2.9:7777")))

        let alone = Bench()
        alone.addresses["192.0.2.1"] = .otherDesktop
        alone.send(.start)
        #expect(alone.waits == ["it did not accept this device"])
    }

    @Test("mDNS finding the desktop elsewhere while connected: a probe proves the key and takes over")
    func movedDesktop() {
        let bench = Bench()
        bench.autoAck = false
        bench.send(.start)
        bench.append(Self.texts(1...2))
        bench.addresses["192.0.2.7"] = .live
        bench.send(.found([Candidate(host: "192.0.2.7", port: 7777, source: "mDNS")]))
        #expect(bench.infos.contains("desktop \"office\" moved to 192.0.2.7:7777; switching"))
        #expect(bench.open.count == 1)
        bench.ackAll()
        #expect(bench.journalAcked == 2)
        #expect(bench.received.map(\.seq) == [1, 2])
    }

    @Test("no address at all: waiting, no address known")
    func noAddress() {
        let bench = Bench(known: [])
        bench.send(.start)
        #expect(bench.waits == ["no address known"])
    }

    @Test("a desktop error is reported as a warning; a desktop bye drops the connection and it is redialled")
    func desktopErrorAndBye() {
        let bench = Bench()
        bench.send(.start)
        bench.desktopSends(.error(code: .gap, message: "expected 4", expected: 4))
        #expect(bench.warnings == ["desktop reported gap: expected 4"])
        bench.desktopSends(.bye)
        #expect(!bench.established)
        bench.run(until: 0.3)
        #expect(bench.established)
    }

    @Test("shortReason: repeats dropped, last three kept")
    func shortReason() {
        #expect(ClientCore.shortReason("a: x; a: x; b: y; c: z; d: w") == "b: y; c: z; d: w")
        #expect(ClientCore.shortReason("") == "no answer")
    }
}
