#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import SpeakBridgeStore

/// `LogFile`: records written in place inside zero padding, fdatasync while the size stays, fsync after a grow,
/// and the reading rule (records end at the last non-zero byte; a NUL ends a line).
@Suite("LogFile: a preallocated log written in place")
struct LogFileTests {
    let root = "/tmp/sb-logfile-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    var path: String { root + "/log" }
    let small = (minimum: 16 << 10, maximum: 64 << 10)

    init() throws { try FileIO.makeDirectory(root) }
    func cleanup() { try? FileManager.default.removeItem(atPath: root) }

    func fileSize() -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : -1
    }

    func record(_ n: Int) -> [UInt8] { Array("{\"n\":\(n),\"pad\":\"\(String(repeating: "x", count: 40))\"}\n".utf8) }

    func texts(_ bytes: [UInt8]) -> [String] { LogFile.lines(bytes).map { String(decoding: $0, as: UTF8.self) } }

    @Test("the file's size stays put across records until they reach its end; a grow adds a whole extent")
    func sizeIsFixedBetweenGrows() throws {
        defer { cleanup() }
        let log = try LogFile.create(path, records: [], extents: small)
        let start = fileSize()
        #expect(start == small.minimum && log.allocated == start && log.end == 0)
        var written: [UInt8] = []
        var n = 0
        while written.count + record(n).count <= start {
            try log.append(record(n))
            written += record(n)
            n += 1
            #expect(fileSize() == start)
        }
        try log.append(record(n))  // crosses the end: one grow
        written += record(n)
        #expect(fileSize() == start + log.extent(after: start) && log.allocated == fileSize())
        #expect(log.end == written.count)
        let bytes = try #require(try FileIO.read(path))
        #expect(Array(bytes[..<written.count]) == written)
        #expect(bytes[written.count...].allSatisfy { $0 == 0 })
        #expect(try LogFile.readRecords(path) == written)
        #expect(texts(bytes).count == n + 1)
    }

    @Test("a steady-state sync is an fdatasync; the first after a grow is a full fsync")
    func syncKinds() throws {
        defer { cleanup() }
        let log = try LogFile.create(path, records: Array("head\n".utf8), extents: small)
        try log.append(record(1))
        #expect(try log.sync() == .data)
        try log.append(record(2))
        #expect(try log.sync() == .data)
        try log.append([UInt8](repeating: 0x41, count: small.minimum) + [0x0A])  // past the end: grows
        #expect(try log.sync() == .full)
        try log.append(record(3))
        #expect(try log.sync() == .data)
        #expect(log.syncCounts == (full: 1, data: 3))
        // Opened as it is (its size maybe not durable yet): the first sync is a full one.
        let again = try LogFile.open(path, end: log.end, extents: small)
        #expect(try again.sync() == .full)
        #expect(try again.sync() == .data)
    }

    @Test("a sync on another thread than the appender's: full first and after the size changed, fdatasync otherwise")
    func otherThreadSyncKinds() throws {
        defer { cleanup() }
        let log = try LogFile.open(path, end: 0, extents: small)  // as it is: its size not known durable
        func syncElsewhere() -> LogFile.SyncKind? {
            let done = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var kind: LogFile.SyncKind?
            Thread.detachNewThread {
                kind = try? log.sync()
                done.signal()
            }
            done.wait()
            return kind
        }
        try log.append(record(1))
        #expect(syncElsewhere() == .full)
        try log.append(record(2))
        #expect(syncElsewhere() == .data)
        try log.append([UInt8](repeating: 0x41, count: small.minimum))
        #expect(syncElsewhere() == .full)
        #expect(log.allocated == fileSize())
        #expect(syncElsewhere() == .data)
    }

    @Test("growing ahead: a syncing thread makes room before an append needs it")
    func growAhead() throws {
        defer { cleanup() }
        let log = try LogFile.create(path, records: [], extents: small)
        try log.growAhead()
        #expect(log.allocated == small.minimum)  // plenty of room: nothing
        try log.append([UInt8](repeating: 0x41, count: small.minimum - 100) + [0x0A])
        try log.growAhead()
        #expect(log.allocated > small.minimum && fileSize() == log.allocated)
        #expect(try log.sync() == .full)
    }

    @Test("reopened after a close without sync, and after a torn record followed by zeros: exactly the whole records")
    func reopenLoadsWholeRecords() throws {
        defer { cleanup() }
        var written: [UInt8] = []
        do {
            let log = try LogFile.create(path, records: [], extents: small)
            for n in 0..<20 {
                try log.append(record(n))
                written += record(n)
            }
        }  // closed, never synced
        var bytes = try #require(try FileIO.read(path))
        #expect(LogFile.dataEnd(bytes) == written.count)
        #expect(texts(bytes) == (0..<20).map { String(decoding: record($0).dropLast(), as: UTF8.self) })
        // A kill mid-write: half a record, the rest of the file still zeros.
        let log = try LogFile.open(path, end: written.count, extents: small)
        try log.append(Array(record(20).prefix(17)))
        bytes = try #require(try FileIO.read(path))
        #expect(LogFile.dataEnd(bytes) == written.count + 17)
        #expect(bytes[LogFile.dataEnd(bytes) - 1] != 0x0A)  // torn: the loaders skip it (and compact)
        #expect(texts(bytes).count == 21 && texts(bytes).last == String(decoding: record(20).prefix(17), as: UTF8.self))
    }

    @Test("a file of zeros holds no record; NULs inside a record cut that line only, whole records around it load")
    func zerosAndNULs() throws {
        defer { cleanup() }  // `init` made the directory
        #expect(LogFile.dataEnd([UInt8](repeating: 0, count: 100_000)) == 0)
        #expect(LogFile.lines([UInt8](repeating: 0, count: 100_000)).isEmpty)
        #expect(LogFile.dataEnd([]) == 0)
        #expect(LogFile.dataEnd([0x41, 0, 0, 0, 0, 0, 0, 0, 0, 0]) == 1)
        #expect(LogFile.dataEnd([0, 0, 0x41] + [UInt8](repeating: 0, count: 17)) == 3)
        let bytes = Array("one\ntw".utf8) + [0, 0, 0] + Array("o\nthree\n".utf8) + [0, 0, 0, 0] + Array("four\n".utf8)
            + [UInt8](repeating: 0, count: 4096)
        #expect(texts(bytes) == ["one", "tw", "o", "three", "four"])
    }

    @Test("rewind: the file is cut back to the given records and one extent of zeros; appends go on after them")
    func rewind() throws {
        defer { cleanup() }
        let log = try LogFile.create(path, records: [], extents: small)
        for n in 0..<2_000 { try log.append(record(n)) }
        #expect(fileSize() > 4 * small.minimum)
        try log.rewind(to: Array("head\n".utf8))
        #expect(fileSize() == small.minimum && log.end == 5)
        try log.append(record(7))
        #expect(try LogFile.readRecords(path) == Array("head\n".utf8) + record(7))
        #expect(try log.sync() == .full)  // the size changed
    }

    @Test("the log file is private and never followed through a link")
    func privateAndNoFollow() throws {
        defer { cleanup() }
        _ = try LogFile.create(path, records: [], extents: small)
        #expect(FileIO.mode(path) == 0o600)
        unlink(path)
        symlink(root + "/elsewhere", path)
        #expect(throws: StoreError.self) { try LogFile.open(path, end: 0, extents: small) }
        #expect(!FileIO.exists(root + "/elsewhere"))
    }
}
