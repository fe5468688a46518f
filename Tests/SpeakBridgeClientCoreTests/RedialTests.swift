import SpeakBridgeClientCore
import SpeakBridgeProtocol
import Testing

/// When `send` dials again (`RedialSchedule`, driven through `ClientCore` by `Bench`'s manual clock and 50 ms ticks).
@Suite("Redial schedule: fast while someone is active, slow after, jittered")
struct RedialTests {
    /// The delays one schedule gives, `count` of them, each asked at time `at`.
    static func delays(seed: UInt64, count: Int, at now: Double) -> [Double] {
        var s = RedialSchedule(seed: seed, now: 0)
        return (0..<count).map { _ in s.next(now: now) }
    }

    @Test("within the fast window: 0.2 s, then at most 0.3 s, each ×0.75–1; after it: doubling to 5 s")
    func delaysFollowTheSchedule() {
        for seed: UInt64 in [0, 1, 42, .max] {
            let fast = Self.delays(seed: seed, count: 20, at: 1)
            #expect(fast[0] >= 0.15 && fast[0] <= 0.2)
            #expect(fast.dropFirst().allSatisfy { $0 >= 0.225 && $0 <= 0.3 })
            let slow = Self.delays(seed: seed, count: 8, at: RedialSchedule.fastWindow + 1)
            let caps = [0.2, 0.4, 0.8, 1.6, 3.2, 5, 5, 5]
            for (d, cap) in zip(slow, caps) { #expect(d >= cap * 0.75 && d <= cap) }
        }
    }

    @Test("the jitter depends on the seed: two devices do not dial in step; one seed repeats")
    func jitterSpreadsDevices() {
        #expect(Self.delays(seed: 7, count: 10, at: 1) == Self.delays(seed: 7, count: 10, at: 1))
        #expect(Self.delays(seed: 7, count: 10, at: 1) != Self.delays(seed: 8, count: 10, at: 1))
        let firsts = Set((0..<50).map { Self.delays(seed: UInt64($0), count: 1, at: 1)[0] })
        #expect(firsts.count > 40)
    }

    @Test("a desktop restarted after 5 s down: reconnected within 0.35 s of listening, the queued line delivered")
    func restartAfterFiveSeconds() {
        for seed: UInt64 in [0, 3, 99] {
            let bench = Bench(jitterSeed: seed)
            bench.send(.start)
            #expect(bench.established)
            bench.addresses["192.0.2.1"] = .dead("connection refused")
            bench.dropAll()
            bench.append(["said while it was down"])
            bench.run(until: 5)
            #expect(!bench.established)
            bench.addresses["192.0.2.1"] = .live  // listening from 5 s on
            bench.run(until: 5.35)  // the longest delay, 0.3 s, plus one tick
            #expect(bench.established)
            #expect(bench.received.map(\.text) == ["said while it was down"])
        }
    }

    @Test("a desktop away for long: dials slow down to one per 3.75–5 s after the fast minute")
    func longOutageSlowsDown() {
        let bench = Bench(jitterSeed: 5)
        bench.send(.start)
        bench.addresses["192.0.2.1"] = .dead("connection refused")
        bench.dropAll()
        let before = bench.dialed.count
        bench.run(until: 60)
        let fast = Double(bench.dialed.count - before)
        // One dial per 0.225–0.3 s of jittered delay, rounded up to the next 50 ms tick.
        #expect(fast >= 60 / 0.35 - 2 && fast <= 60 / 0.225 + 2)
        bench.run(until: 90)
        let mid = bench.dialed.count
        bench.run(until: 150)
        let slow = Double(bench.dialed.count - mid)
        #expect(slow >= 60 / 5.05 - 1 && slow <= 60 / 3.75 + 1)
        #expect(bench.exitCode == nil)
    }

    @Test("a line read while the desktop is away for long: dialed within 0.3 s, fast again for a minute")
    func lineReadBringsRedialForward() {
        let bench = Bench(jitterSeed: 11)
        bench.send(.start)
        bench.addresses["192.0.2.1"] = .dead("connection refused")
        bench.dropAll()
        bench.run(until: 200)  // in the slow pace now: up to 5 s between dials
        bench.addresses["192.0.2.1"] = .live
        bench.append(["back to dictating"])
        bench.run(until: 200.35)
        #expect(bench.established)
        #expect(bench.received.map(\.text) == ["back to dictating"])
        // Lost again at once: the minute after the line is fast again.
        bench.addresses["192.0.2.1"] = .dead("connection refused")
        bench.dropAll()
        let before = bench.dialed.count
        bench.run(until: 210)
        #expect(bench.dialed.count - before >= 25)
    }

    @Test("connected again: the next loss starts from 0.2 s, not from where the schedule was")
    func sessionResetsTheDelay() {
        let bench = Bench(jitterSeed: 2)
        bench.send(.start)
        bench.addresses["192.0.2.1"] = .dead("connection refused")
        bench.dropAll()
        bench.run(until: 100)  // slow pace
        bench.addresses["192.0.2.1"] = .live
        bench.run(until: 106)
        #expect(bench.established)
        bench.dropAll()  // the desktop is still live: redialled after 0.15–0.2 s
        bench.run(until: 106.1)
        #expect(!bench.established)
        bench.run(until: 106.25)
        #expect(bench.established)
    }
}
