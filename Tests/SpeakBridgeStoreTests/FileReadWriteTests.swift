#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import SpeakBridgeStore

/// `FileIO.read` (read straight into an array of the file's size) and `FileIO.writeZeros` (one zero page written
/// many times by pwritev) at the sizes around their edges: every byte as written, nothing more.
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
}
