internal import Glibc
public import SpeakBridgeProtocol
import SpeakBridgeStore
internal import SpeakBridgeSupport

/// One transcript in a `transcript:DIR`, as read from its `NAME.jsonl` (see `TranscriptFormat` for the layout).
public struct TranscriptEntry: Sendable, Equatable {
    /// NAME (without extension).
    public var name: String
    public var directory: String
    public var device: DeviceID
    public var deviceName: String?
    public var session: String
    /// Chunks in the file (complete lines).
    public var lines: Int
    /// The last seq in the file: the sink's durable position for this (device, session).
    public var lastSeq: UInt64
    /// "2026-11-22 16:10:05 UTC", from NAME.
    public var started: String?

    public var markdownPath: String { "\(directory)/\(name).md" }
    public var jsonlPath: String { "\(directory)/\(name).jsonl" }
    public var vttPath: String { "\(directory)/\(name).vtt" }
}

/// The transcript directory's trust rules and its scan. The directory must be ours and closed to everyone else
/// (0700: file names carry device names and times); it is created 0700 when missing. Every file is opened with
/// O_NOFOLLOW and checked on its descriptor (regular, ours, 0600) before it is read or appended to; new files
/// are created with O_EXCL.
public enum TranscriptDirectory {
    /// Creates `path` (0700, with missing parents) or checks the existing one. Throws with a hint.
    static func prepare(_ path: String) throws(SinkError) {
        do throws(StoreError) {
            try PrivatePath.prepareDirectory(path)
        } catch {
            throw SinkError(message: "transcript directory: \(error.message)", hint: error.hint)
        }
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw SinkError(message: "cannot use transcript directory \(path): \(POSIX.describe(errno))")
        }
        let mode = info.st_mode & 0o7777
        if mode & 0o077 != 0 {
            throw SinkError(message: "transcript directory \(path) is open to other users (mode \(String(mode, radix: 8)))",
                            hint: "run `chmod 700 \(path)`: transcripts are private")
        }
    }

    /// Every transcript in `path`, newest first. A `.jsonl` that is not ours, not private or not a transcript is
    /// skipped. With `repair`, a torn last line (a write cut short by a crash, never counted) is truncated away,
    /// and the cut fsynced: when that fails it throws (appending after a cut a crash could undo would leave the next
    /// line glued to the torn one).
    public static func scan(_ path: String, repair: Bool = false) throws(SinkError) -> [TranscriptEntry] {
        guard let dir = opendir(path) else {
            throw SinkError(message: "cannot read transcript directory \(path): \(POSIX.describe(errno))")
        }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = directoryEntryName(entry) { String(decoding: $0, as: UTF8.self) }
            if name.hasSuffix(".jsonl"), !name.hasPrefix(".") { names.append(String(name.dropLast(6))) }
        }
        closedir(dir)
        var entries: [TranscriptEntry] = []
        for name in names.sorted(by: >) {
            if let entry = try read(directory: path, name: name, repair: repair) { entries.append(entry) }
        }
        return entries
    }

    /// Reads `NAME.jsonl`: its first line names the (device, session), its last complete line the position. Reads
    /// the file's head and tail and counts its line feeds (memchr), so a long transcript costs little at start.
    static func read(directory: String, name: String, repair: Bool) throws(SinkError) -> TranscriptEntry? {
        let path = "\(directory)/\(name).jsonl"
        guard let fd = try? openChecked(path, O_RDONLY) else { return nil }
        defer { close(fd) }
        // The tail: up to the line feed before the last complete line (or the whole file).
        guard let (tail, whole) = try? self.tail(fd, path: path, enough: { bytes in
            guard let last = bytes.lastIndex(of: 0x0A) else { return false }
            return bytes[..<last].contains(0x0A)
        }) else { return nil }
        var kept = tail
        if let lastBreak = tail.lastIndex(of: 0x0A) {
            kept = tail[...lastBreak]
            let torn = tail.endIndex - lastBreak - 1
            if torn > 0, repair { try truncate(path, to: Int(fileSize(fd)) - torn) }
        } else {
            if repair && whole && !tail.isEmpty { try truncate(path, to: 0) }
            return nil
        }
        let lines = kept.split(separator: 0x0A).dropFirst(whole ? 0 : 1)
        guard let last = lines.last.flatMap(JSONLine.decode), let first = head(fd).flatMap(JSONLine.decode) else {
            return nil
        }
        return TranscriptEntry(name: name, directory: directory, device: first.device, deviceName: first.deviceName,
                               session: first.session, lines: countLines(fd, upTo: Int(fileSize(fd))),
                               lastSeq: last.chunk.seq, started: TranscriptFormat.started(fromName: name))
    }

    private static func fileSize(_ fd: Int32) -> off_t {
        var info = stat()
        return fstat(fd, &info) == 0 ? info.st_size : 0
    }

    /// The file's first line (without its line feed), read in growing windows, at most 4 MiB; nil without one.
    private static func head(_ fd: Int32) -> [UInt8]? {
        var window = 4096
        while window <= 1 << 22 {
            var bytes = [UInt8](repeating: 0, count: window)
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, window, 0) }
            guard n > 0 else { return nil }
            if let end = bytes[..<n].firstIndex(of: 0x0A) { return Array(bytes[..<end]) }
            guard n == window else { return nil }
            window *= 2
        }
        return nil
    }

    /// Line feeds in the file's first `size` bytes.
    private static func countLines(_ fd: Int32, upTo size: Int) -> Int {
        var count = 0
        var offset = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while offset < size {
            let n = buffer.withUnsafeMutableBytes {
                pread(fd, $0.baseAddress, min($0.count, size - offset), off_t(offset))
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            buffer.withUnsafeBytes { raw in
                // memchr: a byte loop would cost a debug build seconds on a long transcript.
                var cursor = raw.baseAddress!
                let end = raw.baseAddress! + n
                while cursor < end, let hit = memchr(cursor, 0x0A, end - cursor) {
                    count += 1
                    cursor = UnsafeRawPointer(hit) + 1
                }
            }
            offset += n
        }
        return count
    }

    /// Cuts a torn tail off (only ever bytes after the last line feed: an uncounted, partial write) and fsyncs the
    /// file; throws when the cut or its sync fails. A file that cannot be opened for writing, or fails the owner and
    /// mode checks, is left as it is.
    static func truncate(_ path: String, to length: Int) throws(SinkError) {
        let fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        guard (try? PrivatePath.checkFile(fd, path: path)) != nil else { return }
        guard ftruncate(fd, off_t(length)) == 0, fsync(fd) == 0 else {
            throw SinkError(message: "cannot cut the torn last line off transcript \(path): \(POSIX.describe(errno))",
                            hint: "check the disk, then start again: the cut is retried")
        }
    }

    /// Creates `path` (0600) for appending; O_EXCL|O_NOFOLLOW: never opens what someone else put there.
    /// Returns -1 with errno EEXIST when the name is taken.
    static func create(_ path: String) -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd >= 0 { _ = fchmod(fd, 0o600) }  // whatever the umask
        return fd
    }

    /// Opens an existing `path` for appending, checked like every file of ours.
    static func append(_ path: String) throws(SinkError) -> Int32 {
        try openChecked(path, O_WRONLY | O_APPEND)
    }

    /// Opens an existing `path` with `flags` (plus O_NOFOLLOW), checked like every file of ours.
    static func openChecked(_ path: String, _ flags: Int32) throws(SinkError) -> Int32 {
        do throws(StoreError) {
            let fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { throw StoreError.io("open", path, errno: errno) }
            do { try PrivatePath.checkFile(fd, path: path) } catch {
                close(fd)
                throw error
            }
            return fd
        } catch {
            throw SinkError(message: error.message, hint: error.hint)
        }
    }

    /// The last bytes of the file open on `fd`: a window from the end, doubled (from 4 KiB) until `enough` accepts
    /// it or it is the whole file. Returns the bytes and whether they are the whole file.
    static func tail(_ fd: Int32, path: String,
                     enough: (ArraySlice<UInt8>) -> Bool) throws(SinkError) -> (ArraySlice<UInt8>, Bool) {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw SinkError(message: "cannot read \(path): \(POSIX.describe(errno))") }
        let size = Int(info.st_size)
        var window = 4096
        while true {
            let length = min(window, size)
            var bytes = [UInt8](repeating: 0, count: length)
            var got = 0
            while got < length {
                let n = bytes.withUnsafeMutableBytes {
                    pread(fd, $0.baseAddress! + got, length - got, off_t(size - length + got))
                }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { throw SinkError(message: "cannot read \(path): \(POSIX.describe(errno))") }
                got += n
            }
            let whole = length == size
            if whole || enough(bytes[...]) { return (bytes[...], whole) }
            window = window.multipliedReportingOverflow(by: 2).overflow ? size : window * 2
        }
    }

    /// Writes all of `bytes` to `fd`; on any failure the file is cut back to `length` (nothing half written stays).
    static func write(_ fd: Int32, _ bytes: [UInt8], path: String, sync: Bool) throws(SinkError) {
        var info = stat()
        let before = fstat(fd, &info) == 0 ? info.st_size : -1
        do throws(StoreError) {
            try FileIO.writeAll(fd, bytes, path: path)
            if sync, fsync(fd) != 0 { throw StoreError.io("sync", path, errno: errno) }
        } catch {
            if before >= 0 { _ = ftruncate(fd, before) }
            throw SinkError(message: error.message, hint: error.hint)
        }
    }
}

/// Where `speakbridge sessions` finds the transcript directories of a home: `transcripts.json` in its state
/// directory, a JSON array of absolute paths, kept by the daemon (`DeliveryPipeline`) at start.
public enum TranscriptRegistry {
    public static func file(stateDirectory: String) -> String { stateDirectory + "/transcripts.json" }

    /// The recorded directories; empty when none.
    public static func directories(stateDirectory: String) throws(StoreError) -> [String] {
        guard let bytes = try FileIO.read(file(stateDirectory: stateDirectory)) else { return [] }
        return (try? JSONValue.parse(bytes, maxBytes: 1 << 20))?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    /// Adds `directory` (absolute) to the list, if it is not there yet.
    public static func record(_ directory: String, stateDirectory: String) throws(StoreError) {
        var list = try directories(stateDirectory: stateDirectory)
        guard !list.contains(directory) else { return }
        list.append(directory)
        try FileIO.atomicWrite(file(stateDirectory: stateDirectory), JSONValue.array(list.map { .string($0) }).encoded())
    }
}
