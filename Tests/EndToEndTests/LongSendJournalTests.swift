import Foundation
import Testing

/// A long-running `send` keeps its journal bounded on disk: the records of acknowledged lines are dropped while it
/// runs (`Sender.compactLongJournal`, once per 8 MiB of records), not only at its exit. Before, a `send` fed by a
/// fast program (or for hours) grew the journal by every line it ever sent until it exited.
@Suite("send: a long run's journal")
struct LongSendJournalTests {
    static func journalSize(_ directory: String) -> Int {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        guard let name = files.first(where: { $0.hasSuffix(".journal") }),
              let attributes = try? FileManager.default.attributesOfItem(atPath: directory + "/" + name) else { return -1 }
        return (attributes[.size] as? Int) ?? -1
    }

    @Test("25 MB of lines through one run, paced and at once: the journal stays under 10 MiB while it runs, every line once, in order")
    func journalStaysBounded() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (_, reader) = try pair.startWithFIFO()
        defer { reader.stop() }
        let (send, writer) = try pair.pipedSend(label: "long-journal")
        defer { send.terminate() }
        let padding = String(repeating: "x", count: 1_000)
        let count = 24_000
        let expected = (1...count).map { "line \($0) \(padding)" }
        let outbox = pair.phoneHome + "/state/outbox"
        // First in blocks, each waited for: at a tick past 8 MiB every line is acknowledged, and the journal is cut
        // back to its header in place. Then 12 MB in one write, as a fast program sends: the ticks past 8 MiB find
        // lines in flight, which go into the new file that replaces the journal.
        for block in stride(from: 0, to: 12_000, by: 2_000) {
            try writer.write(contentsOf: Data((expected[block..<(block + 2_000)].joined(separator: "\n") + "\n").utf8))
            try Harness.wait("lines through \(block + 2_000) on the FIFO", timeout: 60) { reader.snapshot.count >= block + 2_000 }
        }
        var first = Self.journalSize(outbox)
        try? Harness.wait("the journal under 10 MiB", timeout: 10) { first = Self.journalSize(outbox); return first < 10 << 20 }
        try writer.write(contentsOf: Data((expected[12_000...].joined(separator: "\n") + "\n").utf8))
        try Harness.wait("every line on the FIFO", timeout: 120) { reader.snapshot.count >= count }
        var second = Self.journalSize(outbox)
        try? Harness.wait("the journal under 10 MiB", timeout: 10) { second = Self.journalSize(outbox); return second < 10 << 20 }
        // 12,000 records of about 1,040 bytes: 12.5 MB when nothing is dropped; at most 8 MiB of records and one
        // extent of padding (1 MiB) otherwise, once the lines are acknowledged (they reach the FIFO before). 0 bytes:
        // seen between the truncation and the header of a cut in place.
        #expect(first >= 0 && first < 10 << 20, "journal is \(first) bytes after 12,000 lines of 1 KB, input still open")
        #expect(second >= 0 && second < 10 << 20, "journal is \(second) bytes after \(count) lines of 1 KB, input still open")
        try writer.close()
        let outcome = try send.wait(timeout: 60)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(!outcome.stderr.contains("cannot compact"), "\(outcome.stderr)")
        #expect(reader.snapshot == expected, "lines lost, repeated or out of order: \(reader.snapshot.count) read")
        #expect(JournalContents(directory: outbox).pendingTexts == [])
    }

    /// With the desktop away nothing is acknowledged, so a compaction could drop nothing: the journal grows as it
    /// must and is never rewritten. Before, an estimate of the kept records below their size made a 17 MiB journal of
    /// short unacknowledged lines look half acknowledged, and it was rewritten (file, fsync, rename, directory fsync)
    /// again every 4 MiB (found in review; the journal's inode changed 4 times in 700,000 lines).
    @Test("desktop away, 600,000 short lines: the journal grows past 24 MiB and is never rewritten")
    func noRewriteWhileTheDesktopIsAway() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (_, reader) = try pair.startWithFIFO()
        reader.stop()
        pair.daemon?.terminate()  // paired, then away
        let (send, writer) = try pair.pipedSend(label: "away")
        defer { send.terminate() }
        let outbox = pair.phoneHome + "/state/outbox"
        let inodes = InodeWatch(directory: outbox)
        defer { inodes.stop() }
        for block in stride(from: 0, to: 600_000, by: 50_000) {
            try writer.write(contentsOf: Data((block..<block + 50_000).map { "line \($0)\n" }.joined().utf8))
        }
        try Harness.wait("the journal past 24 MiB", timeout: 120) { Self.journalSize(outbox) > 24 << 20 }
        usleep(300_000)
        #expect(inodes.seen.count == 1, "the journal was replaced \(inodes.seen.count - 1) time(s) with nothing acknowledged")
    }
}

/// The inode numbers a directory's `*.journal` file had, sampled every 5 ms on a thread of its own.
final class InodeWatch: @unchecked Sendable {  // `seen` and `running` only under `lock`
    private let lock = NSLock()
    private var inodes: [UInt64] = []
    private var running = true

    init(directory: String) {
        Thread.detachNewThread { [self] in
            while lock.withLock({ running }) {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
                if let name = names.first(where: { $0.hasSuffix(".journal") }),
                   let inode = (try? FileManager.default.attributesOfItem(atPath: directory + "/" + name))?[.systemFileNumber] as? UInt64 {
                    lock.withLock { if inodes.last != inode { inodes.append(inode) } }
                }
                usleep(5_000)
            }
        }
    }

    var seen: [UInt64] { lock.withLock { Array(Set(inodes)) } }

    func stop() { lock.withLock { running = false } }
}
