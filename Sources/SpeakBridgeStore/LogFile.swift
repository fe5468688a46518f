#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeSupport

/// An append-only log of newline-ended records, kept in a file whose size runs ahead of its records: the records,
/// then zero padding that was really written (not fallocate'd: an unwritten extent turns every first write into it
/// into a metadata change again). Used by the desktop's progress log and the sender's journal.
///
/// Why: appending with write(2) changed the file's size on every record, so every fsync also wrote the inode
/// synchronously (ext4_write_inode, a second device kick): 17 % of the daemon's CPU per paced line, 8 % of the
/// sender's. Here a record is a pwrite(2) at the log's own end offset, an overwrite inside the file's size (no size
/// change, no block allocation), and the per-commit sync is an fdatasync(2): on a journaled ext4 it writes the data
/// pages and skips the journal commit a changed mtime alone would cause; on ext4 without a journal (the bench VM) it
/// still writes the inode block that mtime dirtied, so there the gain is smaller (README → Experiments). When a record would cross the end of the padding, the
/// file grows by a zero-filled extent (`extent(after:)`: doubling from `minimumExtent` to `maximumExtent`) and the
/// next `sync` is a full fsync (the size changed; fdatasync would also write the size, POSIX requires that of it,
/// the full fsync does not rely on it).
///
/// On disk: `records` `zero bytes…`. Readers (`dataEnd`, `lines`): the data ends after the last byte that is not
/// zero; within it, a line ends at a newline or at a NUL byte. A NUL is never part of a record (JSON cannot hold a
/// raw NUL), so it can only be padding, a hole that a power cut left (a page not yet written back when an earlier
/// sync covered less), or corruption; splitting there keeps every whole record around it. A record torn by a kill
/// and followed by zeros is a torn last line, as it was when the file ended there. A file of zeros holds no record.
///
/// Threads: one appender at a time (the owner serializes `append`, `rewind`), and any thread may call `sync` and
/// `growAhead` meanwhile (the desktop's committer, the sender's fsync thread). A grow writes its zeros beyond `allocated`, which no append touches, holding `growth`, so an
/// append that needs room waits for a grow in progress instead of writing where its zeros will land.
///
/// `@unchecked Sendable` is sound: `fd` and the extent bounds are immutable; `end`, `allocated`, `grown` and the
/// counters are read and written only with `state` held; `growth` serializes grows (taken before `state`, never the
/// other way round).
public final class LogFile: @unchecked Sendable {
    public let path: String
    let fd: Int32
    let minimumExtent: Int
    let maximumExtent: Int
    private let state = ThreadLock()
    private let growth = ThreadLock()
    private var endOffset: Int
    private var allocatedSize: Int
    /// The size changed since the last sync: the next one is a full fsync.
    private var grown: Bool
    private var fullSyncs = 0
    private var dataSyncs = 0

    public enum SyncKind: Sendable, Equatable {
        /// fsync(2): data and inode (after a grow, or the first sync of a log opened as it was).
        case full
        /// fdatasync(2): the data pages only.
        case data
    }

    /// The journal's extents (a few records a line; a one-shot `send` reads the whole file at start).
    public static let journalExtents = (minimum: 4 << 10, maximum: 1 << 20)
    /// The progress log's (one daemon, long-lived).
    public static let progressExtents = (minimum: 256 << 10, maximum: 1 << 20)

    /// Takes over `fd` (opened with `FileIO.openLog`: no O_APPEND) whose records end at `end`; the bytes after it
    /// must be zeros. `synced`: the file's size is already durable (it was just written and fsynced); otherwise the
    /// first sync is a full fsync.
    /// Never fails, so the descriptor is always taken over (closed in deinit): if fstat(2) could not tell the size,
    /// the file is taken to end at `end` (the first append then writes zeros after it: no record is overwritten).
    init(fd: Int32, path: String, end: Int, extents: (minimum: Int, maximum: Int), synced: Bool) {
        var info = stat()
        self.fd = fd
        self.path = path
        endOffset = end
        allocatedSize = fstat(fd, &info) == 0 ? max(Int(info.st_size), end) : end
        minimumExtent = extents.minimum
        maximumExtent = extents.maximum
        grown = !synced
    }

    deinit { close(fd) }

    /// Opens the log at `path` as it is (records up to `end`, zeros after), growing it at once if it has little
    /// room left (an old file without padding is upgraded here).
    public static func open(_ path: String, end: Int, extents: (minimum: Int, maximum: Int)) throws(StoreError) -> LogFile {
        let log = LogFile(fd: try FileIO.openLog(path), path: path, end: end, extents: extents, synced: false)
        try log.growAhead()
        return log
    }

    /// Replaces the file at `path` atomically with `records` and a zero extent (`FileIO.atomicWrite`, fsynced) and
    /// opens it.
    public static func create(_ path: String, records: [UInt8], extents: (minimum: Int, maximum: Int)) throws(StoreError) -> LogFile {
        let (file, unsynced) = try replace(path, records: records, extents: extents)
        if let unsynced { throw unsynced }
        return file
    }

    /// `create`, for a log that replaces one in use: when only the directory's fsync failed after the rename, the
    /// new file (which now holds the name) is returned with that error, for the caller to adopt and report.
    public static func replace(_ path: String, records: [UInt8], extents: (minimum: Int, maximum: Int))
        throws(StoreError) -> (LogFile, unsynced: StoreError?) {
        let unsynced = try FileIO.atomicReplace(path, records, padding: extents.minimum)
        return (LogFile(fd: try FileIO.openLog(path), path: path, end: records.count, extents: extents, synced: true),
                unsynced)
    }

    /// Takes over (closes when dropped) a new file `fd` whose records end at `end`, zeros after them, all fsynced:
    /// for a compaction.
    public static func adopt(_ fd: Int32, path: String, end: Int, extents: (minimum: Int, maximum: Int)) -> LogFile {
        LogFile(fd: fd, path: path, end: end, extents: extents, synced: true)
    }

    /// Where the next record goes: the records' length.
    public var end: Int { state.withLock { endOffset } }
    /// The file's size (records and padding).
    public var allocated: Int { state.withLock { allocatedSize } }
    /// (full fsyncs, fdatasyncs) made by `sync`, for tests.
    public var syncCounts: (full: Int, data: Int) { state.withLock { (fullSyncs, dataSyncs) } }

    /// Writes `bytes` (whole records) at the end: one pwrite(2), retried on EINTR and short writes. Grows the file
    /// first when they would not fit. On failure nothing counts as written (the next record goes to the same
    /// offset), and nothing of `bytes` is left in the file: a write that stored part of them (a short write, then a
    /// failure: a bad block, a full copy-on-write filesystem) is undone before the error is thrown (`unwrite`), so
    /// no complete record of a batch reported as failed is found by a later load — its caller took those records as
    /// not written (`send` says the lines were not journaled), and finding them would send them anyway.
    public func append(_ bytes: [UInt8]) throws(StoreError) {
        let (offset, room) = state.withLock { (endOffset, allocatedSize) }
        if bytes.count > room - offset { try grow(toHold: offset + bytes.count) }
        var written = 0
        do throws(StoreError) {
            try FileIO.writeAll(fd, bytes, at: offset, path: path, written: &written)
        } catch {
            if written > 0 { try unwrite(offset..<offset + written, after: error) }
            throw error
        }
        state.withLock { endOffset = offset + bytes.count }
    }

    /// After `append` failed having stored `range` (part of its records): zeros over it again, as the padding was.
    /// If that write fails too (a full copy-on-write filesystem needs room to overwrite as well), the file is cut
    /// at `range`'s start instead — a truncate frees blocks, so it works on a full disk — and the padding after it
    /// with it (the next append grows the file again). A kill in between leaves what a kill during the write
    /// would (complete records of the batch, maybe a torn last one: `load` skips a torn line), but the caller was
    /// told nothing then. Throws, adding to `failure`, only when neither worked: then records of the batch may be
    /// found at the next load.
    @inline(never)  // a failure path
    private func unwrite(_ range: Range<Int>, after failure: StoreError) throws(StoreError) {
        var zeroing: StoreError
        do throws(StoreError) {
            try FileIO.writeZeros(fd, from: range.lowerBound, to: range.upperBound, path: path)
            return
        } catch {
            zeroing = error
        }
        growth.lock()  // a grow on another thread writes beyond `allocated`, which the cut below changes
        defer { growth.unlock() }
        if ftruncate(fd, off_t(range.lowerBound)) == 0 {
            state.withLock {
                allocatedSize = range.lowerBound
                grown = true
            }
            return
        }
        let cut = StoreError.io("truncate", path, errno: errno)
        throw StoreError(failure.message + "; the \(range.count) byte(s) of it that were written could not be "
                         + "removed (\(zeroing.message); \(cut.message)), so some of these records may be "
                         + "found in \(path) later", hint: failure.hint ?? "check the disk (dmesg)")
    }

    /// Makes everything appended so far durable: fdatasync, or fsync when the size changed since the last sync.
    @discardableResult
    public func sync() throws(StoreError) -> SyncKind {
        let full = state.withLock {
            defer { grown = false }
            return grown
        }
        guard (full ? fsync(fd) : fdatasync(fd)) == 0 else {
            let code = errno
            if full { state.withLock { grown = true } }
            throw .io("sync", path, errno: code)
        }
        state.withLock { if full { fullSyncs += 1 } else { dataSyncs += 1 } }
        return full ? .full : .data
    }

    /// Grows the file now if less than half a minimum extent is left, so that an append rarely has to: for a
    /// thread that syncs (the grow's zeros then go out with its fsync, off the appender's path). Only ahead of
    /// need: a failure (a full disk) leaves every record appended so far where it was, inside the file, so a
    /// caller about to sync them goes on with the sync (`ProgressLog.sync`); an append that does not fit then
    /// fails in its own grow.
    public func growAhead() throws(StoreError) {
        let (offset, room) = state.withLock { (endOffset, allocatedSize) }
        if room - offset < minimumExtent / 2 { try grow(toHold: offset + minimumExtent / 2) }
    }

    /// Cuts the log back to `records` at offset 0: truncates the file (a large log gives its blocks back) and writes
    /// `records` with a minimum extent of zeros. Not synced: a crash leaves the old log, an empty file, or `records`
    /// (and maybe zeros) — see `Outbox.resetIfDrained` for why each is fine there.
    public func rewind(to records: [UInt8]) throws(StoreError) {
        growth.lock()
        defer { growth.unlock() }
        guard ftruncate(fd, 0) == 0 else { throw .io("truncate", path, errno: errno) }
        state.withLock {
            endOffset = 0
            allocatedSize = 0
            grown = true
        }
        let size = Self.roundUp(max(records.count + minimumExtent / 2, minimumExtent))
        try FileIO.writeAll(fd, records, at: 0, path: path)
        try FileIO.writeZeros(fd, from: records.count, to: size, path: path)
        state.withLock {
            endOffset = records.count
            allocatedSize = size
        }
    }

    /// Extends the file with zeros until it holds `needed` bytes (by whole extents). Holds `growth` for the write.
    /// Throws "cannot grow PATH: …" when the zeros cannot be written (ENOSPC: the disk is full); `allocated` stays,
    /// and the next sync is a full fsync (the zeros written before the failure may have changed the size).
    private func grow(toHold needed: Int) throws(StoreError) {
        growth.lock()
        defer { growth.unlock() }
        let from = state.withLock { allocatedSize }  // only a grow changes it, and `growth` is held
        guard from < needed else { return }  // another thread grew it meanwhile
        var to = from
        while to < needed { to += extent(after: to) }
        do throws(StoreError) {
            try FileIO.writeZeros(fd, from: from, to: to, path: path, what: "grow")
        } catch {
            state.withLock { grown = true }
            throw error
        }
        state.withLock {
            allocatedSize = to
            grown = true
        }
    }

    /// The next extent for a file of `size` bytes: as large as the file (doubling: few grows in a burst), from
    /// `minimumExtent` to `maximumExtent`, whole pages.
    func extent(after size: Int) -> Int {
        Self.roundUp(min(max(size, minimumExtent), maximumExtent))
    }

    static func roundUp(_ n: Int) -> Int { (n + 4095) & ~4095 }

    // MARK: reading

    /// Where the records of a log file's bytes end: after the last byte that is not zero.
    public static func dataEnd(_ bytes: [UInt8]) -> Int {
        bytes.withUnsafeBytes { raw -> Int in
            var n = raw.count
            // Eight bytes at a time over the padding (up to an extent of zeros is read at every open).
            while n >= 8 && raw.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self) == 0 { n -= 8 }
            while n > 0 && raw[n - 1] == 0 { n -= 1 }
            return n
        }
    }

    /// The records of the log file at `path` (its bytes up to `dataEnd`: without the padding); nil if it does not
    /// exist. Checked and read as `FileIO.read` does.
    public static func readRecords(_ path: String) throws(StoreError) -> [UInt8]? {
        guard var bytes = try FileIO.read(path) else { return nil }
        bytes.removeSubrange(dataEnd(bytes)...)
        return bytes
    }

    /// The lines of a log file's records (`dataEnd`), split at newlines and at NUL bytes, without empty ones. The
    /// last one is torn (a kill mid-write) when the records do not end with a newline.
    public static func lines(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        bytes[..<dataEnd(bytes)].split(omittingEmptySubsequences: true) { $0 == 0x0A || $0 == 0 }
    }
}
