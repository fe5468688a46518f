#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeCrypto
import Testing
@testable import SpeakBridgeProtocol

/// Issue 8 row 10, the figures: how long the responder takes to reject session message 1 from an unknown key and
/// from a paired key with a wrong psk. A benchmark, not a test: it asserts nothing about time and runs only with
/// `SPEAKBRIDGE_BENCH=1` (build in release for meaningful numbers):
///
///     SPEAKBRIDGE_BENCH=1 swift test -c release --filter RejectionTimingBenchmark
@Suite("Benchmark: rejection timing", .enabled(if: getenv("SPEAKBRIDGE_BENCH") != nil, "set SPEAKBRIDGE_BENCH=1"))
struct RejectionTimingBenchmark {
    @Test("medians of rejecting an unknown key and a paired key with a wrong psk (n = 1000 each, interleaved)")
    func medians() throws {
        let desktop = X25519PrivateKey()
        let paired = X25519PrivateKey()
        let storedPSK = SymmetricKey.random()
        let context = ResponderContext(
            localStatic: desktop, localName: "desk", pairingSecret: { nil },
            sessionPSK: { $0 == paired.publicKey ? storedPSK : nil }, delivered: { _, _ in 0 })
        func message1(from key: X25519PrivateKey) throws -> [UInt8] {
            var i = try InitiatorMachine(intent: .session, localStatic: key, desktopKey: desktop.publicKey,
                                         psk: SymmetricKey.random(), firstMessage: .hello(agent: "bench"))
            return try i.start()
        }
        func nanoseconds(_ frame: [UInt8]) -> UInt64 {
            var r = ResponderMachine(intent: .session, context: context)
            let start = DispatchTimeNanos.now()
            let actions = r.receive(frame)
            let elapsed = DispatchTimeNanos.now() - start
            precondition(actions.allSatisfy { if case .close = $0 { return true } else { return false } })
            return elapsed
        }
        let n = 1_000
        var unknown: [UInt64] = []
        var wrongPSK: [UInt64] = []
        for round in 0..<(n + 50) {
            let a = try message1(from: X25519PrivateKey())
            let b = try message1(from: paired)
            let (tu, tw) = round % 2 == 0 ? (nanoseconds(a), nanoseconds(b)) : { let w = nanoseconds(b); return (nanoseconds(a), w) }()
            if round >= 50 {  // warm-up
                unknown.append(tu)
                wrongPSK.append(tw)
            }
        }
        func median(_ xs: [UInt64]) -> Double { Double(xs.sorted()[xs.count / 2]) / 1_000 }
        func p90(_ xs: [UInt64]) -> Double { Double(xs.sorted()[xs.count * 9 / 10]) / 1_000 }
        print("rejection of session message 1, n = \(n) each:")
        print("  unknown key:             median \(median(unknown)) µs, p90 \(p90(unknown)) µs")
        print("  paired key, wrong psk:   median \(median(wrongPSK)) µs, p90 \(p90(wrongPSK)) µs")
        print("  difference of medians:   \(median(wrongPSK) - median(unknown)) µs")
    }
}

/// Monotonic nanoseconds without Foundation.
enum DispatchTimeNanos {
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
