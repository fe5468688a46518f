#if canImport(Glibc)
import Glibc
#endif

/// The name of a `readdir(3)` entry, read in place.
///
/// Why not `entry.pointee.d_name`: glibc packs entries into its buffer at their record length (`d_reclen`), so a
/// `dirent` is often shorter than `MemoryLayout<dirent>.size`, and copying the struct (or its 256-byte `d_name`)
/// reads past the record — past the end of the buffer for the last entries, a SIGSEGV when that is a page boundary
/// (seen once in the test process, with over a thousand descriptors listed from /proc/self/fd). The name itself
/// ends with a NUL inside its record, so reading up to that NUL stays within it.
public func directoryEntryName<R>(_ entry: UnsafeMutablePointer<dirent>,
                                  _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
    let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name) ?? 19  // 19 on x86_64 and aarch64 glibc
    let name = UnsafeRawPointer(entry).advanced(by: offset)
    let count = strlen(name.assumingMemoryBound(to: CChar.self))
    return body(UnsafeBufferPointer(start: name.assumingMemoryBound(to: UInt8.self), count: count))
}
