#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import SpeakBridgeStore

/// `FileIO.read` (read straight into an array of the file's size) and `FileIO.writeZeros` (one zero page written
/// a page at a time, each write ending on a page boundary) at the sizes around their edges: every byte as written,
/// nothing more.
@Suite("FileIO: read and writeZeros at their edges")
struct FileReadWriteTests {
    let root = "/tmp/sb-fileio-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    var path: String { root + "/f" }

    init() throws { try FileIO.makeDirectory(root) }
    func cleanup() { try? FileManager.default.removeItem(atPath: root) }

    @Test(arguments: [0, 1, 4_095, 4_096, 4_097, 65_535, 65_536, 65_537, 300_001])
    func readReturnsExactlyTheFile(size: Int) throws {
        defer { cleanup() }
        let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        try FileIO.atomicWrite(path, bytes)
        #expect(try FileIO.read(path) == bytes)
    }

    @Test(arguments: [(0, 1), (0, 4_096), (100, 4_196), (1, 262_145), (5_000, 1_300_000)])
    func writeZerosCoversTheRangeExactly(range: (Int, Int)) throws {
        defer { cleanup() }
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        defer { close(fd) }
        let marker = [UInt8](repeating: 0xAB, count: range.0)
        try FileIO.writeAll(fd, marker, at: 0, path: path)
        try FileIO.writeZeros(fd, from: range.0, to: range.1, path: path)
        let got = try #require(try FileIO.read(path))
        #expect(got.count == range.1)
        #expect(got.prefix(range.0).allSatisfy { $0 == 0xAB })
        #expect(got.dropFirst(range.0).allSatisfy { $0 == 0 })
    }

    /// Whether a file's page-cache folios are large can be seen only as root (`/proc/kpageflags`), and only where the
    /// filesystem takes large folios at all (ext4 since Linux 6.16, XFS): shown by a control file written in one
    /// 256 KiB pwrite(2).
    static let largeFoliosVisible: Bool = {
        guard geteuid() == 0 else { return false }
        let path = "/tmp/sb-folio-probe-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        defer { close(fd); unlink(path) }
        let zeros = [UInt8](repeating: 0, count: 256 << 10)
        guard zeros.withUnsafeBytes({ pwrite(fd, $0.baseAddress!, $0.count, 0) }) == zeros.count else { return false }
        return (compoundPages(fd, length: zeros.count) ?? []).contains(true)
    }()

    /// For each page of `fd`'s first `length` bytes: whether the page cache holds it in a compound (large) folio.
    static func compoundPages(_ fd: Int32, length: Int) -> [Bool]? {
        let pageSize = 4_096
        guard let map = mmap(nil, length, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else { return nil }
        defer { munmap(map, length) }
        let pages = length / pageSize
        var touched = 0
        for page in 0..<pages { touched &+= Int(map.load(fromByteOffset: page * pageSize, as: UInt8.self)) }
        guard touched == 0 else { return nil }  // zeros only; also keeps the reads
        let pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC)
        let flags = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC)
        defer { close(pagemap); close(flags) }
        guard pagemap >= 0, flags >= 0 else { return nil }
        var result: [Bool] = []
        for page in 0..<pages {
            var entry: UInt64 = 0
            let virtualPage = (UInt(bitPattern: map) + UInt(page * pageSize)) / UInt(pageSize)
            guard pread(pagemap, &entry, 8, off_t(virtualPage * 8)) == 8, entry >> 63 == 1 else { return nil }
            let frame = entry & ((1 << 55) - 1)
            var bits: UInt64 = 0
            guard frame != 0, pread(flags, &bits, 8, off_t(frame * 8)) == 8 else { return nil }
            result.append(bits & (1 << 15 | 1 << 16) != 0)  // KPF_COMPOUND_HEAD, KPF_COMPOUND_TAIL
        }
        return result
    }

    /// A log's padding must sit in page-sized folios: a record later written into a large one walks all its buffer
    /// heads (`FileIO.writeZeros`). Fails with the padding written 256 KiB a call.
    @Test(.enabled(if: largeFoliosVisible)) func zerosAreWrittenIntoPageSizedFolios() throws {
        defer { cleanup() }
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        defer { close(fd) }
        try FileIO.writeZeros(fd, from: 0, to: 1 << 20, path: path)
        let compound = try #require(Self.compoundPages(fd, length: 1 << 20))
        #expect(compound.count == 256)
        #expect(!compound.contains(true))
    }
}
