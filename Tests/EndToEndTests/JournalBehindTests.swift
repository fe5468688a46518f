import Foundation
import Testing

/// A journal that lost records the desktop has: what a crash of the phone's machine leaves when the kernel had not
/// written them back (`send` does not fsync a line the desktop acknowledged in time: Sender+Clock.swift). Stood in
/// for by an older copy of the journal put back and another boot ID (`SPEAKBRIDGE_BOOT_ID`): this VM can be neither
/// power-cut nor rebooted. Lines journaled after it — also by a run that never reached the desktop — must reach the
/// desktop, not be dropped as duplicates of numbers it already has (`Outbox`: Reservations).
@Suite("End to end: a journal behind the desktop", .serialized)
struct JournalBehindTests {
    func send(_ pair: Pair, _ args: [String], boot: String, label: String) throws -> Outcome {
        let p = try Proc(["send"] + args, home: pair.phoneHome, env: ["SPEAKBRIDGE_BOOT_ID": boot], label: label)
        return try p.wait(timeout: 60)
    }

    @Test("an older journal after a reboot: a run that cannot reach the desktop, then one that can; every line once, in order")
    func olderJournalAfterReboot() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (fifo, reader) = try pair.startWithFIFO()
        let first = try send(pair, ["--text", "one", "--text", "two"], boot: "boot-a", label: "send-1")
        #expect(first.status == 0, "send failed: \(first.stderr)")
        let outbox = pair.phoneHome + "/state/outbox"
        let journals = try FileManager.default.contentsOfDirectory(atPath: outbox).filter { $0.hasSuffix(".journal") }
        try #require(journals.count == 1, "one journal: \(journals)")
        let journal = outbox + "/" + journals[0]
        let older = try Data(contentsOf: URL(fileURLWithPath: journal))
        let second = try send(pair, ["--text", "three", "--text", "four"], boot: "boot-a", label: "send-2")
        #expect(second.status == 0, "send failed: \(second.stderr)")
        try Harness.wait("4 lines") { reader.count >= 4 }
        reader.stop()
        try older.write(to: URL(fileURLWithPath: journal))  // the desktop has 1…4; the journal knows of 1…2

        // Rebooted, the desktop away: "five" is journaled, not sent (exit 75, kept).
        pair.daemon?.terminate()
        let away = try send(pair, ["--text", "five", "--timeout", "1"], boot: "boot-b", label: "send-3")
        #expect(away.status == 75, "\(away.status): \(away.stderr)")

        try pair.startDaemon(sinks: ["fifo:" + fifo])
        let after = FifoReader(path: fifo)
        after.start()
        defer { after.stop() }
        let third = try send(pair, ["--text", "six"], boot: "boot-b", label: "send-4")
        #expect(third.status == 0, "send failed: \(third.stderr)")
        try Harness.wait("five and six") { after.count >= 2 }
        usleep(200_000)
        #expect(after.snapshot == ["five", "six"])
        // Nothing left: the next run resends nothing.
        let fourth = try send(pair, ["--text", "seven"], boot: "boot-b", label: "send-5")
        #expect(fourth.status == 0 && !fourth.stderr.contains("resending"), "\(fourth.stderr)")
        try Harness.wait("seven") { after.count >= 3 }
        #expect(after.snapshot == ["five", "six", "seven"])
    }
}
