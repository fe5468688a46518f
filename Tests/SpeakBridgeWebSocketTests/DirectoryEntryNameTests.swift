#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeSupport
import Testing

/// `directoryEntryName` reads a `readdir(3)` entry's name in place, never past its record: glibc packs records at
/// their length, so the last one in its buffer may end right where readable memory ends. The record here is built
/// against a page that cannot be read (PROT_NONE); copying `entry.pointee.d_name` — what the three readdir loops did
/// before, and what crashed the test process once in `ClientDescriptorCap.highestOpenDescriptor` — reads 256 bytes
/// and faults on it.
@Suite("Directory entry names read within their record")
struct DirectoryEntryNameTests {
    @Test("a short record that ends at an unreadable page: its name, and no read beyond it",
          arguments: ["7", "1362", "journal.jsonl"])
    func shortRecordAtAPageEnd(name: String) throws {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let mapping = try #require(mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        try #require(mapping != MAP_FAILED)
        defer { munmap(mapping, 2 * page) }
        try #require(mprotect(mapping + page, page, PROT_NONE) == 0)

        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name) ?? 19
        // The record's length as the kernel makes it: the name and its NUL, rounded up to 8 bytes.
        let recordLength = (nameOffset + name.utf8.count + 1 + 7) / 8 * 8
        #expect(recordLength < MemoryLayout<dirent>.size)  // shorter than the struct: the point of the test
        let record = mapping + page - recordLength
        memset(record, 0, recordLength)
        record.storeBytes(of: UInt16(recordLength), toByteOffset: MemoryLayout<dirent>.offset(of: \dirent.d_reclen)!,
                          as: UInt16.self)
        for (index, byte) in name.utf8.enumerated() {
            record.storeBytes(of: byte, toByteOffset: nameOffset + index, as: UInt8.self)
        }
        let entry = record.bindMemory(to: dirent.self, capacity: 1)
        let read = directoryEntryName(entry) { String(decoding: $0, as: UTF8.self) }
        #expect(read == name)
    }

    @Test("every name of a real directory, as ls sees them")
    func realDirectory() throws {
        let dir = "/tmp/sb-dirent-\(getpid())"
        try #require(mkdir(dir, 0o700) == 0)
        defer { rmdir(dir) }
        let names = ["a", String(repeating: "n", count: 255), "ünïcödé", "1362"]
        for name in names { close(open(dir + "/" + name, O_CREAT | O_WRONLY, 0o600)) }
        defer { for name in names { unlink(dir + "/" + name) } }
        let handle = try #require(opendir(dir))
        defer { closedir(handle) }
        var seen: [String] = []
        while let entry = readdir(handle) {
            seen.append(directoryEntryName(entry) { String(decoding: $0, as: UTF8.self) })
        }
        #expect(Set(seen) == Set(names + [".", ".."]))
    }
}
