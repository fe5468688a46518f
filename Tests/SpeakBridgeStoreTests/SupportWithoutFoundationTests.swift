#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import SpeakBridgeSupport

/// Issue 13: the binary links FoundationEssentials only, so what it took from Foundation now lives in
/// SpeakBridgeSupport. These pin that the replacements do what Foundation's did (this test target may import
/// Foundation, so it compares against it directly).
@Suite("Support without Foundation")
struct SupportWithoutFoundationTests {
    @Test("TextTrim's sets are Foundation's whitespaces and whitespacesAndNewlines, scalar by scalar")
    func trimSetsMatchFoundation() {
        var mismatches: [String] = []
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            if TextTrim.isHorizontalSpace(scalar) != CharacterSet.whitespaces.contains(scalar) {
                mismatches.append("U+\(String(value, radix: 16)) whitespaces")
            }
            let both = TextTrim.isHorizontalSpace(scalar) || TextTrim.isLineBreak(scalar)
            if both != CharacterSet.whitespacesAndNewlines.contains(scalar) {
                mismatches.append("U+\(String(value, radix: 16)) whitespacesAndNewlines")
            }
        }
        #expect(mismatches == [])
    }

    @Test("TextTrim trims as trimmingCharacters(in:) does", arguments: [
        "", " ", " \t\n\r ", "y", " y ", "\tyes\r\n", "\u{3000}a b\u{3000}", "\u{200B}x\u{2028}", " \u{301}a ",
        "e\u{301} ", "\u{85}line\u{85}", "  two  words  ", "\u{1F600} ", "\r\n4f2a\n",
    ])
    func trimsLikeFoundation(_ text: String) {
        #expect(TextTrim.whitespace(text) == text.trimmingCharacters(in: .whitespaces))
        #expect(TextTrim.whitespaceAndNewlines(text) == text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// `devices` (last seen), `outbox` (held since) and `config pending` print times with FoundationEssentials'
    /// ISO8601FormatStyle where they used Foundation's ISO8601DateFormatter: the same text, year 1 to past 9999.
    @Test("Date.ISO8601FormatStyle prints what ISO8601DateFormatter printed")
    func iso8601OutputUnchanged() {
        let old = ISO8601DateFormatter()
        var seconds = -62_135_596_800.0  // 0001-01-01T00:00:00Z
        var mismatches: [String] = []
        while seconds < 253_402_300_800.0 + 86_400 * 400 {  // past 9999-12-31
            let date = Date(timeIntervalSince1970: seconds)
            if Date.ISO8601FormatStyle().format(date) != old.string(from: date) { mismatches.append("\(seconds)") }
            seconds += 86_400 * 97 + 3_671.5
        }
        for seconds in [0, 0.999, -0.5, 1_700_000_000, 4_294_967_295] {
            let date = Date(timeIntervalSince1970: seconds)
            if Date.ISO8601FormatStyle().format(date) != old.string(from: date) { mismatches.append("\(seconds)") }
        }
        #expect(mismatches == [])
    }

    @Test("Threads.start runs the body on a new thread with the given name")
    func startsNamedThread() {
        let done = DispatchSemaphore(value: 0)
        let seen = Locked<(name: String, sameThread: Bool)?>(nil)
        let caller = pthread_self()
        let started = Threads.start(name: "sb-test-thread") {
            let fd = open("/proc/thread-self/comm", O_RDONLY)
            var buffer = [UInt8](repeating: 0, count: 64)
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            close(fd)
            let name = String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self)
            seen.withLock { $0 = (name, pthread_equal(pthread_self(), caller) != 0) }
            done.signal()
        }
        #expect(started)
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(seen.withLock { $0?.name } == "sb-test-thread\n")
        #expect(seen.withLock { $0?.sameThread } == false)
    }

    @Test("Threads.sleep sleeps at least as long as asked")
    func sleeps() {
        var before = timespec(), after = timespec()
        clock_gettime(CLOCK_MONOTONIC, &before)
        Threads.sleep(seconds: 0.05)
        clock_gettime(CLOCK_MONOTONIC, &after)
        let elapsed = Double(after.tv_sec - before.tv_sec) + Double(after.tv_nsec - before.tv_nsec) / 1e9
        #expect(elapsed >= 0.05)
    }

    @Test("ThreadCondition wakes a waiter that waits for a predicate; ThreadLock excludes")
    func conditionAndLock() {
        // A box whose fields are guarded by the condition's lock / the plain lock (as the binary's users do).
        final class Shared: @unchecked Sendable {  // fields read and written only under `condition` / `lock`
            let condition = ThreadCondition()
            let lock = ThreadLock()
            var ready = false
            var woke = false
            var counter = 0
        }
        let shared = Shared()
        let finished = DispatchSemaphore(value: 0)
        Threads.start(name: "sb-test-wait") {
            shared.condition.lock()
            while !shared.ready { shared.condition.wait() }
            shared.woke = true
            shared.condition.unlock()
            finished.signal()
        }
        shared.condition.withLock {
            shared.ready = true
            shared.condition.signal()
        }
        #expect(finished.wait(timeout: .now() + 10) == .success)
        #expect(shared.condition.withLock { shared.woke })

        let workers = 4, rounds = 10_000
        for _ in 0..<workers {
            Threads.start {
                for _ in 0..<rounds { shared.lock.withLock { shared.counter += 1 } }
                finished.signal()
            }
        }
        for _ in 0..<workers { #expect(finished.wait(timeout: .now() + 30) == .success) }
        #expect(shared.lock.withLock { shared.counter } == workers * rounds)
    }
}
