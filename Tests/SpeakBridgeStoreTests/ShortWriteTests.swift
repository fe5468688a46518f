#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeProtocol
import SpeakBridgeTestSupport
import Testing
@testable import SpeakBridgeStore

/// A batch of journal records that the disk cuts short — a write(2) that stores part of it, then one that fails —
/// leaves none of its records behind (`LogFile.append`, `unwrite`): the caller is told the batch was not journaled,
/// so a later load must not find any of it (before: the whole records before the cut stayed, and the next `send`
/// sent lines the last one had reported as not accepted). The journal is on `FailingDisk` (FUSE,
/// Tests/fuse/failfs.c), whose `cutNextWrite` makes the short write and the failures after it.
@Suite("Store: a journal batch cut short by the disk", .serialized)
struct ShortWriteTests: JournalFixture {
    let root = "/tmp/sb-shortwrite-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    /// The unacknowledged lines a fresh load of the journal finds.
    func queued() throws -> [String] {
        let loaded = try Outbox.load(path)
        return loaded.chunks.filter { $0.seq > loaded.acked }.map(\.text)
    }

    /// Where the records of `texts`, journaled as one batch from `firstSeq`, end: after the second whole one and
    /// `into` bytes of the third.
    func cut(_ texts: [String], firstSeq: UInt64, into: Int) -> Int {
        let (records, _) = MessageCodec.lineRecords(texts, firstSeq: firstSeq, ack: nil)
        let ends = records.indices.filter { records[$0] == 0x0A }
        return ends[1] + 1 + into
    }

    @Test("cut after two whole records: the append throws, no record of the batch loads, the next batch takes its place")
    func shortWriteLeavesNoRecord() throws {
        try withFailingDisk { disk in
            let outbox = try Outbox(home: home, desktop: device)
            _ = try outbox.append(texts: ["before"])
            try outbox.sync()
            let texts = ["one", "two", "three"]
            disk.cutNextWrite(after: cut(texts, firstSeq: outbox.nextSeq, into: 5))
            #expect(throws: StoreError.self) { _ = try outbox.append(texts: texts) }
            #expect(disk.failedWrites == 2, "the short write, then the failed write of the rest")
            #expect(try queued() == ["before"], "before: \"one\" and \"two\" loaded, though reported as not journaled")
            _ = try outbox.append(texts: ["again"])  // the disk works again: the same offset, the same numbers
            try outbox.sync()
            #expect(try queued() == ["before", "again"])
            #expect(try Outbox.load(path).chunks.map(\.seq) == [1, 2])
        }
    }

    @Test("cut, and the zeros over the cut fail too (a full copy-on-write disk): the file is cut back instead")
    func zeroingFailsTruncates() throws {
        try withFailingDisk { disk in
            let outbox = try Outbox(home: home, desktop: device)
            _ = try outbox.append(texts: ["before"])
            try outbox.sync()
            let end = outbox.log.end
            let texts = ["one", "two", "three"]
            disk.cutNextWrite(after: cut(texts, firstSeq: outbox.nextSeq, into: 5), thenFailing: 2)
            #expect(throws: StoreError.self) { _ = try outbox.append(texts: texts) }
            #expect(disk.failedWrites == 3, "the short write, the rest of the batch, the zeros")
            #expect(outbox.log.allocated == end, "cut back where the batch began")
            #expect(try queued() == ["before"])
            _ = try outbox.append(texts: ["again"])  // grows the file again
            try outbox.sync()
            #expect(try queued() == ["before", "again"])
        }
    }
}
