#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeTestSupport
import Testing
@testable import SpeakBridgeStore

/// The journal on a full disk (`FailingDisk.freeSpace`: FUSE, Tests/fuse/failfs.c, where bytes a file gives back are
/// free again, as on a real disk).
@Suite("Store: the journal on a full disk", .serialized)
struct FullDiskJournalTests: JournalFixture {
    let root = "/tmp/sb-fulldisk-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    /// A journal over the compaction size, written while there was room; reopened on a full disk its compaction's
    /// new file cannot be written: it is used as it is, its lines pending as before, and a line fits in its padding.
    /// Before, the open threw, and `send` could not start at all.
    @Test("a large journal opens as it is when its compaction cannot be written")
    func largeJournalOpensOnAFullDisk() throws {
        try withFailingDisk { disk in
            let texts = (1...2_000).map { "a line of about fifty bytes, number \($0)" }
            do {
                let outbox = try Outbox(home: home, desktop: device)
                _ = try outbox.append(texts: texts)
                try outbox.markAcked(1_500)
                try outbox.log.growAhead()  // room ahead for one more line
                try outbox.sync()
                #expect(outbox.log.end > Outbox.compactAbove)
            }
            disk.freeSpace = 0
            let outbox = try Outbox(home: home, desktop: device)
            #expect(disk.spaceFailures > 0, "the compaction was not tried")
            #expect(outbox.pending.map(\.text) == Array(texts[1_500...]))
            _ = try outbox.append(texts: ["after"])
            try outbox.sync()
            #expect(try Outbox.load(path).chunks.filter { $0.seq > 1_500 }.map(\.text) == Array(texts[1_500...]) + ["after"])
        }
    }

    /// Every line acknowledged (the ack record not journaled: `send` on a full disk), cut back in place to its header with that
    /// level, which needs no room — the truncation gives it back first.
    @Test("a drained journal is cut back on a full disk with the level given")
    func drainedJournalCutBackOnAFullDisk() throws {
        try withFailingDisk { disk in
            let outbox = try Outbox(home: home, desktop: device)
            _ = try outbox.append(texts: (1...200).map { "line \($0)" })
            try outbox.sync()
            disk.freeSpace = 0
            #expect(try outbox.resetIfDrained(acknowledged: 199) == false, "line 200 is not acknowledged")
            #expect(try outbox.resetIfDrained(acknowledged: 200))
            #expect(outbox.acked == 200)
            let loaded = try Outbox.load(path)
            #expect(loaded.acked == 200 && loaded.chunks.isEmpty)
            let next = try outbox.append(texts: ["next"])
            #expect(next.map(\.seq) == [201])
        }
    }
}
