import SpeakBridgeClientCore
import SpeakBridgeProtocol
import Testing

/// `held` from the desktop: a sink there has not taken line N. `send` says so once per (sink, reason), keeps the
/// line and waits for its ack as before.
@Suite("ClientCore: held lines")
struct HeldTests {
    static func held(_ seq: Int, sink: String = "clipboard", reason: String, session: String = "s-bench") -> Message {
        // `.config(type:body:)` encodes any type as {"type":T,…body}: byte for byte the `held` message.
        .config(type: "held", body: .object([("session", .string(session)), ("seq", .integer(Int64(seq))),
                                             ("sink", .string(sink)), ("reason", .string(reason))]))
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

    @Test("the decoding shim: only a well-formed held is read")
    func decode() {
        func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
        #expect(HeldNotice.decode(bytes(#"{"type":"held","session":"s-1","seq":3,"sink":"fifo","reason":"full"}"#))
                == HeldNotice(session: "s-1", seq: 3, sink: "fifo", reason: "full"))
        #expect(HeldNotice.decode(bytes(#"{"type":"held","session":"s-1","seq":0,"sink":"fifo","reason":"full"}"#)) == nil)
        #expect(HeldNotice.decode(bytes(#"{"type":"held","session":"s-1","seq":3,"reason":"full"}"#)) == nil)
        #expect(HeldNotice.decode(bytes(#"{"type":"other","session":"s-1","seq":3,"sink":"x","reason":"y"}"#)) == nil)
        #expect(HeldNotice.decode(bytes("not json")) == nil)
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
}
