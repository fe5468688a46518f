import SpeakBridgeConfig
import SpeakBridgeProtocol
import Testing

@Suite("Hybrid logical clock")
struct HLCTests {
    let a = device(1)
    let b = device(2)

    @Test("local writes are strictly increasing, even when the wall clock goes back")
    func monotonic() {
        var clock = HybridLogicalClock()
        let t1 = clock.tick(now: 1_000, device: a)
        let t2 = clock.tick(now: 1_000, device: a)
        let t3 = clock.tick(now: 500, device: a)  // clock set back
        let t4 = clock.tick(now: 2_000, device: a)
        #expect(t1 < t2 && t2 < t3 && t3 < t4)
        #expect(t3.ms == 1_000 && t3.counter == 2)
        #expect(t4.ms == 2_000 && t4.counter == 0)
    }

    @Test("after observing a remote version, the next local write is newer than it")
    func observe() {
        var clock = HybridLogicalClock()
        _ = clock.tick(now: 1_000, device: a)
        let remote = HLCTimestamp(ms: 5_000, counter: 7, device: b)
        clock.observe(remote, now: 1_001)
        let next = clock.tick(now: 1_002, device: a)
        #expect(remote < next)
        #expect(next.ms == 5_000 && next.counter == 9)
        // Equal ms on both sides: counter goes past both.
        var c2 = HybridLogicalClock(ms: 5_000, counter: 3)
        c2.observe(HLCTimestamp(ms: 5_000, counter: 10, device: b), now: 4_000)
        #expect(c2.ms == 5_000 && c2.counter == 11)
        // The wall clock ahead of everything: counter resets.
        var c3 = HybridLogicalClock(ms: 5_000, counter: 3)
        c3.observe(HLCTimestamp(ms: 4_000, counter: 10, device: b), now: 9_000)
        #expect(c3 == HybridLogicalClock(ms: 9_000, counter: 0))
    }

    @Test("counter overflow moves to the next millisecond, still monotonic")
    func overflow() {
        var clock = HybridLogicalClock(ms: 10, counter: UInt16.max)
        let t = clock.tick(now: 10, device: a)
        #expect(t.ms == 11 && t.counter == 0)
    }

    @Test("text form round-trips and has exactly one spelling")
    func textForm() throws {
        let t = HLCTimestamp(ms: 1_718_031_234_567, counter: 3, device: a)
        let text = t.description
        #expect(text == "1718031234567:3:\(a.compact)")
        #expect(try HLCTimestamp(parsing: text) == t)
        for bad in ["", "1:2", "01:0:\(a.compact)", "1:01:\(a.compact)", "1:0:\(a.compact.lowercased())",
                    "1:0:\(a.description)", "1:65536:\(a.compact)", "281474976710656:0:\(a.compact)",
                    "-1:0:\(a.compact)", "1:0:\(a.compact):x", "1.5:0:\(a.compact)", " 1:0:\(a.compact)"] {
            #expect(throws: ConfigError.self, "\(bad)") { try HLCTimestamp(parsing: bad) }
        }
    }

    @Test("order: milliseconds, then counter, then device ID (deterministic tie-break)")
    func order() {
        let x = HLCTimestamp(ms: 5, counter: 0, device: b)
        let y = HLCTimestamp(ms: 5, counter: 1, device: a)
        let z = HLCTimestamp(ms: 6, counter: 0, device: a)
        #expect(x < y && y < z)
        let tieA = HLCTimestamp(ms: 5, counter: 0, device: a)
        #expect(tieA < x)  // same ms and counter: device 0x01… < 0x02…
        #expect(!(x < x))
    }

    @Test("a version far in the future is refused")
    func futureClock() {
        let now: UInt64 = 1_000_000
        let ok = HLCTimestamp(ms: now + HybridLogicalClock.maxForwardSkewMillis, counter: 0, device: b)
        let bad = HLCTimestamp(ms: now + HybridLogicalClock.maxForwardSkewMillis + 1, counter: 0, device: b)
        #expect(throws: Never.self) { try HybridLogicalClock.check(ok, now: now, key: "k") }
        #expect(throws: ConfigError(.clock, "the version of k is 300 s in the future (limit 300 s)",
                                    hint: "check the clock of device \(b)")) {
            try HybridLogicalClock.check(bad, now: now, key: "k")
        }
    }
}
