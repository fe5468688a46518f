#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
@testable import SpeakBridgeStore

/// The journal as a `LogFile`: records then zero padding, its size fixed between grows, synced with fdatasync;
/// old journals (no padding), torn records followed by zeros, and zeros or NULs where records should be.
@Suite("Outbox: a preallocated journal")
struct OutboxPreallocTests: JournalFixture {
    let root = "/tmp/sb-outbox-prealloc-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    func stat() throws -> (size: Int, inode: UInt64) {
        var info = Glibc.stat()
        let status = lstat(path, &info)
        try #require(status == 0)
        return (Int(info.st_size), UInt64(info.st_ino))
    }

    /// Writes `bytes` at `offset` into the journal, as a process would have before it was killed.
    func poke(_ bytes: [UInt8], at offset: Int) throws {
        let fd = open(path, O_WRONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        try FileIO.writeAll(fd, bytes, at: offset, path: path)
    }

    @Test("the size stays put line after line; every sync but the first of a run is an fdatasync")
    func sizeFixedAndDataSyncs() throws {
        defer { cleanup() }
        let outbox = try Outbox(home: home, desktop: device)
        let size = try stat().size
        #expect(size >= LogFile.journalExtents.minimum)
        // As many lines as fit in half the first extent (about 55 bytes a record with its ack): no grow yet.
        let steady = LogFile.journalExtents.minimum / 2 / 64
        for n in 1...steady {
            _ = try outbox.append(text: "line \(n) of a steady dictation", ack: UInt64(n - 1))
            try outbox.sync()
            #expect(try stat().size == size)
        }
        // Created (and fsynced) with its padding; the first line's reservation (`Outbox`: Reservations) is one more.
        #expect(outbox.log.syncCounts == (full: 0, data: steady + 1))
        // Past the padding: one grow, its sync a full fsync, then fdatasyncs again; every line loads.
        let long = String(repeating: "y", count: 1_000)
        var texts = (1...steady).map { "line \($0) of a steady dictation" }
        while try stat().size == size {
            texts.append(long)
            _ = try outbox.append(text: long)
        }
        try outbox.sync()
        _ = try outbox.append(text: "after the grow")
        texts.append("after the grow")
        try outbox.sync()
        #expect(outbox.log.syncCounts == (full: 1, data: steady + 2))
        #expect(try Outbox.load(path).chunks.map(\.text) == texts)
    }

    @Test("closed without a sync and reopened: every line it journaled is pending, in place")
    func reopenWithoutSync() throws {
        defer { cleanup() }
        do {
            let outbox = try Outbox(home: home, desktop: device)
            _ = try outbox.append(texts: ["one", "two", "three"])
            try outbox.markAcked(1)
        }
        let before = try stat()
        let again = try Outbox(home: home, desktop: device)
        #expect(try stat().inode == before.inode)  // not rewritten
        #expect(again.pending.map(\.text) == ["two", "three"] && again.acked == 1 && again.nextSeq == 4)
        _ = try again.append(texts: ["four"])
        #expect(try Outbox.load(path).chunks.map(\.text) == ["one", "two", "three", "four"])
    }

    @Test("a torn record followed by zeros is a torn last line: skipped, and the journal compacted on open")
    func tornRecordThenZeros() throws {
        defer { cleanup() }
        var end = 0
        do {
            let outbox = try Outbox(home: home, desktop: device)
            _ = try outbox.append(texts: ["one", "two"])
            end = outbox.log.end
        }
        let torn = Array(#"{"c":{"seq":3,"text":"thr"#.utf8)
        try poke(torn, at: end)
        let before = try stat()
        do {  // the journal's lock is held while `again` lives
            let again = try Outbox(home: home, desktop: device)
            #expect(again.pending.map(\.text) == ["one", "two"] && again.nextSeq == 3)
            #expect(try stat().inode != before.inode)  // compacted: the next record is not glued to the torn one
            _ = try again.append(texts: ["three"])
        }
        let third = try Outbox(home: home, desktop: device)
        #expect(third.pending.map(\.text) == ["one", "two", "three"])
    }

    @Test("an old journal (no padding) loads unchanged and gets its padding in place")
    func oldFormatUpgrades() throws {
        defer { cleanup() }
        try home.prepare()
        let old = Array(#"{"session":"s-0123456789abcdef","acked":1}"#.utf8) + [0x0A]
            + Array(#"{"c":{"seq":1,"text":"one"}}"#.utf8) + [0x0A]
            + Array(#"{"c":{"seq":2,"text":"two"}}"#.utf8) + [0x0A]
        try FileIO.atomicWrite(path, old)
        let inode = try stat().inode
        let outbox = try Outbox(home: home, desktop: device)
        #expect(outbox.session == "s-0123456789abcdef" && outbox.acked == 1 && outbox.pending.map(\.text) == ["two"])
        #expect(try stat().inode == inode)  // in place, not rewritten
        #expect(try stat().size >= LogFile.journalExtents.minimum / 2)
        #expect(try LogFile.readRecords(path) == old)
        _ = try outbox.append(texts: ["three"])
        try outbox.sync()
        #expect(outbox.log.syncCounts.full == 1)  // the first sync of a journal opened as it was
        #expect(try Outbox.load(path).chunks.map(\.text) == ["two", "three"])  // above the header's ack
    }

    @Test("a journal of zeros holds nothing: a new session, nothing pending, a clean file")
    func allZeros() throws {
        defer { cleanup() }
        try home.prepare()
        try FileIO.atomicWrite(path, [UInt8](repeating: 0, count: 70_000))
        let outbox = try Outbox(home: home, desktop: device)
        #expect(outbox.pending.isEmpty && outbox.nextSeq == 1 && outbox.session.hasPrefix("s-"))
        #expect(try Outbox.load(path).session == outbox.session)
    }

    @Test("NULs inside a record: that record is skipped, the whole records before and after it still load")
    func nulsInsideARecord() throws {
        defer { cleanup() }
        var offsets: [Int] = []
        do {
            let outbox = try Outbox(home: home, desktop: device)
            for text in ["one", "two", "three"] {
                offsets.append(outbox.log.end)
                _ = try outbox.append(texts: [text])
            }
        }
        try poke([0, 0, 0, 0], at: offsets[1] + 8)  // inside "two"'s record
        let again = try Outbox(home: home, desktop: device)
        #expect(again.pending.map(\.text) == ["one", "three"])
    }

    @Test("reset at a clean exit gives a burst's padding back")
    func resetShrinks() throws {
        defer { cleanup() }
        let outbox = try Outbox(home: home, desktop: device)
        let chunks = try outbox.append(texts: (1...3_000).map { "line \($0) with a few dictated words" })
        try outbox.markAcked(chunks.last!.seq)
        #expect(try stat().size > 4 * LogFile.journalExtents.minimum)
        #expect(try outbox.resetIfDrained())
        #expect(try stat().size == LogFile.journalExtents.minimum)
        #expect(outbox.log.end < 160)  // the header alone (session, ack level, reservation)
    }
}
