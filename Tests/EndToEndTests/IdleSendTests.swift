import Foundation
import Testing

/// Issue 13 (CPU per line, idle cost): a `send` whose input is still open but whose lines are all acknowledged has
/// nothing to time, so it must not wake up (it used to tick 20 times a second, ~80 context switches); the next
/// line still goes through at once.
@Suite("send idle with its input open")
struct IdleSendTests {
    /// Context switches of every thread of `pid` so far (voluntary and not), from /proc.
    static func contextSwitches(_ pid: Int32) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        var total = 0
        for task in tasks {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8) else { continue }
            for line in status.split(separator: "\n") where line.contains("ctxt_switches:") {
                total += Int(line.split(separator: "\t").last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "") ?? 0
            }
        }
        return total
    }

    @Test("all acknowledged, input open: no wake-ups; a later line is delivered and the end of input exits 0")
    func idleSendSleeps() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (_, reader) = try pair.startWithFIFO()
        defer { reader.stop() }
        let (send, writer) = try pair.pipedSend(label: "idle-send")
        defer { send.terminate() }
        try writer.write(contentsOf: Data("first line\n".utf8))
        try Harness.wait("the first line on the FIFO") { reader.snapshot == ["first line"] }
        // The ack comes after the desktop's fsync; the clock stops at the first tick after it is journaled.
        usleep(800_000)
        let before = Self.contextSwitches(send.pid)
        usleep(1_000_000)
        let woke = Self.contextSwitches(send.pid) - before
        // Under `make sanitize` the runtime's own background thread wakes (TSan's every 100 ms): not ours to count.
        if ProcessInfo.processInfo.environment["SPEAKBRIDGE_SANITIZER"] == nil {
            #expect(woke <= 5, "an idle send woke \(woke) times in 1 s")
        }
        try writer.write(contentsOf: Data("second line\n".utf8))
        try Harness.wait("the second line on the FIFO") { reader.snapshot == ["first line", "second line"] }
        try writer.close()
        let outcome = try send.wait(timeout: 30)
        #expect(outcome.status == 0, "\(outcome.stderr)")
    }
}
