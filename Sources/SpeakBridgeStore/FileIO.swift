#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeCrypto
import SpeakBridgeSupport

/// Small, explicit POSIX file helpers: private modes, atomic replace, fsync. One place turns errno into `StoreError`.
///
/// Plain POSIX, not swift-system: every call needs its own errno→StoreError mapping with the path, O_NOFOLLOW and
/// fd-based trust checks, and buffer wiping, so FileDescriptor would add a dependency without shrinking the code.
public enum FileIO {
    public static func makeDirectory(_ path: String) throws(StoreError) {
        var components: [String] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            components.append(String(part))
            let prefix = "/" + components.joined(separator: "/")
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw .io("create directory", prefix, errno: errno)
            }
        }
    }

    public static func exists(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0
    }

    /// Reads one of our files whole; nil if it does not exist. Opened with O_NOFOLLOW (a symlink is refused, not
    /// followed) and O_NONBLOCK (a FIFO planted in its place cannot hang us); the opened descriptor must pass
    /// `PrivatePath.checkFile` (regular, ours, 0600), so the check and the read are about the same inode.
    /// - Parameter leaked: advice if others could have read it (see `PrivatePath.checkFile`).
    public static func read(_ path: String, leaked: String? = nil) throws(StoreError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            if errno == ELOOP { throw PrivatePath.symlinkRefused(path) }
            throw .io("open", path, errno: errno)
        }
        defer { close(fd) }
        try PrivatePath.checkFile(fd, path: path, leaked: leaked)
        // Read straight into an array of the file's size (one byte more, to see the end in the same read): no
        // 64 KiB bounce buffer to zero and wipe (16 page faults at every start of `send`). A file that grows while
        // it is read gets a larger array; the smaller one is wiped before it is freed (it may hold keys).
        var info = stat()
        let size = fstat(fd, &info) == 0 ? max(Int(info.st_size), 0) : 0
        var out = [UInt8](repeating: 0, count: min(size, Int.max - 1) + 1)
        var filled = 0
        while true {
            if filled == out.count {
                var larger = [UInt8](repeating: 0, count: out.count * 2)
                larger.replaceSubrange(0..<filled, with: out[0..<filled])
                SecretMemory.wipe(&out)
                out = larger
            }
            let n = out.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if n < 0 {
                if errno == EINTR { continue }
                SecretMemory.wipe(&out)
                throw .io("read", path, errno: errno)
            }
            if n == 0 { break }
            filled += n
        }
        out.removeSubrange(filled...)  // in place: no copy
        return out
    }

    /// Writes all bytes to `fd`, retrying on EINTR and short writes.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws(StoreError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .io("write", path, errno: errno)
            }
            offset += n
        }
    }

    /// Writes all bytes to `fd` at `offset` (pwrite(2): the descriptor's own offset is neither used nor moved),
    /// retrying on EINTR and short writes.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8], at offset: Int, path: String) throws(StoreError) {
        var written = 0
        try writeAll(fd, bytes, at: offset, path: path, written: &written)
    }

    /// `writeAll(_:_:at:path:)` that tells how far it got: `written` is the count of `bytes` stored from `offset`
    /// on (all of them on success; on failure, those a short write stored before the call that failed).
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8], at offset: Int, path: String,
                                written done: inout Int) throws(StoreError) {
        done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, $0.count - done, off_t(offset + done)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .io("write", path, errno: errno)
            }
            done += n
        }
    }

    /// Writes zeros over `from..<to` of `fd`, one page per pwrite(2), each ending on a page boundary: really written
    /// blocks, not a hole or an unwritten extent (see `LogFile`).
    ///
    /// Why a page per call: the page cache sizes a new folio by the write that creates it, and ext4 (since Linux
    /// 6.16) and XFS take large folios. Padding written 256 KiB a call (pwritev, until the fourteenth performance
    /// session) sat in large folios, and every later record written into one — an 81-byte pwrite(2) — walked all of
    /// its buffer heads (`ext4_block_write_begin`, `block_commit_write`): 11–12 µs of CPU after a 2 ms pause against
    /// 7 µs in a page-sized folio (C probe on this VM's ext4, 2,000 records). A grow costs a syscall per 4 KiB
    /// instead: 1 MiB of zeros in about 0.85 ms against 0.25 ms (C probe), once per thousands of records, and mostly
    /// on the thread that syncs (`LogFile.growAhead`).
    /// `what`: the verb of the error when a write fails ("cannot `what` PATH: …").
    public static func writeZeros(_ fd: Int32, from: Int, to: Int, path: String, what: String = "write") throws(StoreError) {
        let failure: Int32? = zeroPage.withUnsafeBytes { page in
            var offset = from
            while offset < to {
                let pageEnd = (offset / page.count + 1) * page.count
                let n = pwrite(fd, page.baseAddress!, min(pageEnd, to) - offset, off_t(offset))
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += n
            }
            return nil
        }
        if let failure { throw .io(what, path, errno: failure) }
    }

    private static let zeroPage = [UInt8](repeating: 0, count: 4_096)

    /// Replaces `path` atomically with `bytes` (mode 0600): temp file, fsync, rename, fsync of the directory.
    /// `padding`: that many zero bytes follow `bytes` in the file (a `LogFile`'s free space), written and synced
    /// with it.
    /// A crash at any point leaves either the old or the new content, never a mix.
    ///
    /// The temp file is created next to the target under a fresh random name with O_CREAT|O_EXCL|O_NOFOLLOW, so
    /// nothing planted in the directory (a symlink at a guessable `X.tmp`) can redirect the write; rename(2)
    /// replaces a symlink at `path` itself rather than following it.
    /// A failed fsync of the directory throws too (after the rename: the file is in place, but its name may not be
    /// durable; a write that may not survive a crash is not reported as done).
    public static func atomicWrite(_ path: String, _ bytes: [UInt8], padding: Int = 0) throws(StoreError) {
        if let unsynced = try atomicReplace(path, bytes, padding: padding) { throw unsynced }
    }

    /// `atomicWrite`, telling apart a failure before the rename (thrown: `path` is as it was) from a failed fsync
    /// of the directory after it (returned: `path` now names the new content, but the name may not survive a
    /// crash). A caller that keeps writing to the file must go on with the new one then: the old one has no name
    /// any more, and what is written to it is lost.
    public static func atomicReplace(_ path: String, _ bytes: [UInt8], padding: Int = 0) throws(StoreError) -> StoreError? {
        var temp = ""
        var fd: Int32 = -1
        for _ in 0..<8 {
            temp = path + ".tmp-" + Hex.encode(SecureRandom.bytes(8))
            fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 || errno != EEXIST { break }
        }
        guard fd >= 0 else { throw .io("create", temp, errno: errno) }
        do throws(StoreError) {
            try writeAll(fd, bytes, path: temp)
            try writeZeros(fd, from: bytes.count, to: bytes.count + padding, path: temp)
            guard fsync(fd) == 0 else { throw StoreError.io("sync", temp, errno: errno) }
        } catch {
            close(fd)
            unlink(temp)
            throw error
        }
        close(fd)
        guard rename(temp, path) == 0 else {
            let code = errno
            unlink(temp)
            throw .io("replace", path, errno: code)
        }
        guard syncDirectory(of: path) else { return .io("sync", path, errno: errno) }
        return nil
    }

    /// fsyncs the directory holding `path`; false (errno set) when it could not be opened or synced. Not
    /// discardable: a failed directory sync must be reported (a rename or unlink may not survive a crash).
    public static func syncDirectory(of path: String) -> Bool {
        let dir = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let fd = open(dir.isEmpty ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        let synced = fsync(fd) == 0
        let code = errno
        close(fd)
        errno = code
        return synced
    }

    /// Opens `path` for appending (created 0600). O_NOFOLLOW, and the descriptor must pass `PrivatePath.checkFile`.
    public static func openAppend(_ path: String, leaked: String? = nil) throws(StoreError) -> Int32 {
        try openPrivate(path, O_APPEND, leaked: leaked)
    }

    /// Opens `path` for positioned writes (pwrite(2); created 0600), for a `LogFile`: like `openAppend` but without
    /// O_APPEND, which would make Linux's pwrite append wherever it was asked to write.
    public static func openLog(_ path: String, leaked: String? = nil) throws(StoreError) -> Int32 {
        try openPrivate(path, 0, leaked: leaked)
    }

    /// `path` opened write-only with `extra` flags, created 0600, never through a symlink; the descriptor must pass
    /// `PrivatePath.checkFile` (closed if it does not).
    private static func openPrivate(_ path: String, _ extra: Int32, leaked: String?) throws(StoreError) -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | extra | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == ELOOP { throw PrivatePath.symlinkRefused(path) }
            throw .io("open", path, errno: errno)
        }
        do {
            try PrivatePath.checkFile(fd, path: path, leaked: leaked)
        } catch {
            close(fd)
            throw error
        }
        return fd  // O_NONBLOCK has no effect on the regular file it must be
    }

    public static func mode(_ path: String) -> mode_t? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return st.st_mode & 0o777
    }
}
