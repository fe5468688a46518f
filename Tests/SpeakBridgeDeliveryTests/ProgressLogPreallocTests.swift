#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
import SpeakBridgeStore
@testable import SpeakBridgeDelivery

/// The progress log as a `LogFile`: its size fixed between grows, a steady-state commit an fdatasync, and every
/// file the old code or a crash could leave loaded the documented way.
@Suite("Progress log: preallocated, written in place")
struct ProgressLogPreallocTests: ProgressLogFixture {
    let root = "/tmp/sb-progress-prealloc-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    func fileSize() -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : -1
    }

    func line(_ sink: String, _ session: String, _ seq: Int) -> String {
        "[\"\(sink)\",\"\(device.description)\",\"\(session)\",\(seq)]\n"
    }

    @Test("the size stays put across records and commits; each commit is an fdatasync; records after a grow load")
    func sizeFixedAndDataSyncs() throws {
        try prepare()
        defer { cleanup() }
        do {
            let log = try ProgressLog(path: path)
            let size = fileSize()
            #expect(size >= LogFile.progressExtents.minimum)
            var slot: ProgressSlot?
            for seq in 1...200 {
                let key = ProgressLog.Key(sink: "stdout", device: device, session: "s")
                slot = try log.record(key, seq: UInt64(seq), cached: slot).slot
                if seq % 10 == 0 { try log.sync() }
                #expect(fileSize() == size)
            }
            #expect(log.syncKinds == (full: 0, data: 20))
            // Enough records to cross the padding: the log grows (ahead, in `sync`), the size moves, records load.
            var seq = 200
            while fileSize() == size {
                seq += 1
                try log.record(sink: "fifo:/a", device: device, session: "s", seq: UInt64(seq))
                if seq % 50 == 0 { try log.sync() }
            }
            try log.record(sink: "fifo:/b", device: device, session: "s", seq: 1)
            #expect(log.syncKinds.full >= 1)
            #expect(try LogFile.readRecords(path).map { String(decoding: $0, as: UTF8.self) }?
                .hasSuffix(line("fifo:/a", "s", seq) + line("fifo:/b", "s", 1)) == true)
        }  // closed without a last sync
        let again = try ProgressLog(path: path)
        #expect(again.progress(sink: "stdout", device: device, session: "s") == 200)
        #expect(again.progress(sink: "fifo:/b", device: device, session: "s") == 1)
    }

    @Test("an old log (no padding) loads unchanged and is rewritten with padding")
    func oldFormatUpgrades() throws {
        try prepare()
        defer { cleanup() }
        let old = line("stdout", "s", 5) + line("fifo:/x", "s", 3) + line("stdout", "s", 7)
        try FileIO.atomicWrite(path, Array(old.utf8))
        let log = try ProgressLog(path: path)
        #expect(log.entries() == [.init(sink: "stdout", device: device, session: "s"): 7,
                                  .init(sink: "fifo:/x", device: device, session: "s"): 3])
        #expect(fileSize() >= LogFile.progressExtents.minimum)
        #expect(try #require(try LogFile.readRecords(path)).count == (line("stdout", "s", 7) + line("fifo:/x", "s", 3)).utf8.count)
    }

    @Test("a torn record followed by zeros is ignored like a torn last line; the records before it load")
    func tornRecordThenZeros() throws {
        try prepare()
        defer { cleanup() }
        do {
            let log = try ProgressLog(path: path)
            try log.record(sink: "stdout", device: device, session: "s", seq: 4)
            try log.record(sink: "stdout", device: device, session: "s", seq: 5)
            // A kill in the middle of the next record's write: half a line, the padding still zeros after it.
            try log.file.append(Array(line("stdout", "s", 6).utf8.prefix(20)))
        }
        let again = try ProgressLog(path: path)
        #expect(again.progress(sink: "stdout", device: device, session: "s") == 5)
        try again.record(sink: "stdout", device: device, session: "s", seq: 6)
        #expect(try ProgressLog(path: path).progress(sink: "stdout", device: device, session: "s") == 6)
    }

    @Test("NULs inside a record: that record is skipped, the whole ones before and after it load; zeros alone: empty")
    func nulsAndZeros() throws {
        try prepare()
        defer { cleanup() }
        let bytes = Array(line("a", "s", 1).utf8) + Array(line("b", "s", 2).utf8.prefix(9)) + [0, 0, 0]
            + Array(line("b", "s", 2).utf8.dropFirst(9)) + Array(line("c", "s", 3).utf8) + [UInt8](repeating: 0, count: 5000)
        try FileIO.atomicWrite(path, bytes)
        let log = try ProgressLog(path: path)
        #expect(log.entries() == [.init(sink: "a", device: device, session: "s"): 1,
                                  .init(sink: "c", device: device, session: "s"): 3])
        try FileIO.atomicWrite(path, [UInt8](repeating: 0, count: 300_000))
        #expect(try ProgressLog(path: path).entries().isEmpty)
    }

    @Test("a compaction's new file is padded too, and records go on into it")
    func compactionPads() throws {
        try prepare()
        defer { cleanup() }
        let log = try ProgressLog(path: path)
        log.lock.withLock { log.compactAfterBytes = 1_000 }
        for seq in 1...40 { try log.record(sink: "stdout", device: device, session: "s", seq: UInt64(seq)) }
        try log.sync()  // compacts
        #expect(try LogFile.readRecords(path).map { String(decoding: $0, as: UTF8.self) } == line("stdout", "s", 40))
        #expect(fileSize() >= LogFile.progressExtents.minimum)
        try log.record(sink: "stdout", device: device, session: "s", seq: 41)
        try log.sync()
        #expect(log.syncKinds.data >= 1)
        #expect(try ProgressLog(path: path).progress(sink: "stdout", device: device, session: "s") == 41)
    }
}
