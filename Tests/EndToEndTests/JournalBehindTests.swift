import Foundation
import Testing

/// A journal that lost records the desktop has (what a crash of the phone's machine leaves when the kernel had
/// not written them back: acknowledged lines need no fsync of the client's), stood in for by an older copy of the
/// journal put back — the one stand-in: this VM cannot be power-cut. Lines read after it must reach the desktop,
/// not be dropped as duplicates of numbers it already has (OutboxWindow+Renumber.swift).
@Suite("End to end: a journal behind the desktop", .serialized)
struct JournalBehindTests {
    @Test("an older journal put back: the next lines are renumbered after the desktop's and arrive, once, in order")
    func olderJournalPutBack() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (_, reader) = try pair.startWithFIFO()
        defer { reader.stop() }
        let first = try pair.sendLines(["one", "two"]).wait(timeout: 60)
        #expect(first.status == 0, "send failed: \(first.stderr)")
        let outbox = pair.phoneHome + "/state/outbox"
        let journals = try FileManager.default.contentsOfDirectory(atPath: outbox).filter { $0.hasSuffix(".journal") }
        try #require(journals.count == 1, "one journal: \(journals)")
        let journal = outbox + "/" + journals[0]
        let older = try Data(contentsOf: URL(fileURLWithPath: journal))

        let second = try pair.sendLines(["three", "four"]).wait(timeout: 60)
        #expect(second.status == 0, "send failed: \(second.stderr)")
        try Harness.wait("4 lines") { reader.count >= 4 }
        try older.write(to: URL(fileURLWithPath: journal))  // the desktop has 1…4, the journal says 2

        let third = try pair.sendLines(["five", "six"]).wait(timeout: 60)
        #expect(third.status == 0, "send failed: \(third.stderr)")
        #expect(third.stderr.contains("has 2 more lines of this session than this device's journal"), "\(third.stderr)")
        try Harness.wait("6 lines") { reader.count >= 6 }
        usleep(200_000)
        #expect(reader.snapshot == ["one", "two", "three", "four", "five", "six"])

        // The journal holds the new numbers: a fourth run goes on after them without another renumbering.
        let fourth = try pair.sendLines(["seven"]).wait(timeout: 60)
        #expect(fourth.status == 0 && !fourth.stderr.contains("more line"), "\(fourth.stderr)")
        try Harness.wait("7 lines") { reader.count >= 7 }
        #expect(reader.snapshot.last == "seven")
    }
}
