import SpeakBridgeClientCore
import SpeakBridgeProtocol
import Testing

/// `held` from the desktop: a sink there has not taken line N. `send` says so once per (sink, reason), keeps the
/// line and waits for its ack as before.
@Suite("ClientCore: held lines")
struct HeldTests {
    static func held(_ seq: Int, sink: String = "clipboard", reason: String, session: String = "s-bench") -> Message {
        .held(HeldNotice(session: session, seq: UInt64(seq), sink: sink, reason: reason))
    }

    @Test("told once per (sink, reason), escaped; the line stays pending and its ack still ends the run")
    func heldLine() {
        let bench = Bench()
        bench.autoAck = false
        bench.send(.start)
        bench.append(["one", "two"])
        bench.send(.inputEnded)
        bench.desktopSends(Self.held(2, reason: "no clipboard owner"))
        bench.desktopSends(Self.held(2, reason: "no clipboard owner"))
        bench.desktopSends(Self.held(2, reason: "wl-copy failed:\u{1B}[31m red\nline"))
        bench.desktopSends(Self.held(2, reason: "held elsewhere", session: "s-other"))
        #expect(bench.infos == [
            "desktop holds line 2 at clipboard: no clipboard owner",
            "desktop holds line 2 at clipboard: wl-copy failed:\\x1b[31m red\\nline",
        ])
        #expect(bench.exitCode == nil)
        #expect(bench.core.window.pendingCount == 2)
        bench.ackAll()
        #expect(bench.exitCode == 0)
    }

    @Test("held lines are still timed: the default limit after the input ended gives 75")
    func heldStillTimed() {
        let bench = Bench()
        bench.holding = true
        bench.send(.start)
        bench.append(["one"])
        bench.send(.inputEnded)
        bench.desktopSends(Self.held(1, reason: "no clipboard owner"))
        bench.run(until: 30.3)
        #expect(bench.exitCode == 75)
    }

    @Test("a long sink name or reason is cut, with an ellipsis")
    func cut() {
        let line = HeldNotice(session: "s", seq: 1, sink: String(repeating: "s", count: 64),
                              reason: String(repeating: "r", count: 512)).line
        #expect(line == "desktop holds line 1 at \(String(repeating: "s", count: 64)): \(String(repeating: "r", count: 300))…")
    }

    @Test("at most 32 distinct held lines in one run")
    func bounded() {
        let bench = Bench()
        bench.autoAck = false
        bench.send(.start)
        bench.append(["one"])
        for i in 0..<40 { bench.desktopSends(Self.held(1, reason: "reason \(i)")) }
        #expect(bench.infos.count == 32)
    }

    /// The ack timeout is for dead connections: a desktop that says a sink holds the first unacknowledged line is
    /// alive, so no redial while it holds (the old core redialled every 15 s and resent its whole window into the
    /// same hold, and each redial let the desktop read more of it). An ack that moves, or a new connection, times
    /// acks again; a stale notice (a line already acknowledged) excuses nothing.
    @Test("a held line is not an ack stall: no redial while the desktop holds it, timed again after an ack")
    func heldIsNoStall() {
        let bench = Bench()
        bench.holding = true
        bench.send(.start)
        bench.append(["one", "two"])
        bench.desktopSends(Self.held(1, reason: "no reader on FIFO"))
        bench.run(until: 120)
        #expect(bench.warnings.isEmpty, "\(bench.warnings)")
        #expect(bench.established && bench.exitCode == nil)
        // The sink takes line 1: acked; line 2 is in flight and timed again.
        bench.holding = false
        bench.ledger["s-bench"] = 1
        bench.ackAll()
        #expect(bench.journalAcked == 1)
        bench.holding = true
        bench.desktopSends(Self.held(1, reason: "no reader on FIFO"))  // stale: line 1 is acknowledged
        bench.run(until: 134)
        #expect(bench.warnings.isEmpty)
        bench.run(until: 136)
        #expect(bench.warnings == ["no acknowledgement for 15 s; reconnecting"])
        // A new connection: nothing held is known on it until the desktop says so again.
        bench.run(until: 137)
        #expect(bench.established)
        bench.desktopSends(Self.held(2, reason: "no reader on FIFO"))
        bench.run(until: 300)
        #expect(bench.warnings.count == 1)
        bench.dropAll()
        bench.run(until: 301)
        #expect(bench.established)
        bench.run(until: 317)
        #expect(bench.warnings.count == 2, "\(bench.warnings)")
    }
}
