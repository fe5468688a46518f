internal import Glibc
public import SpeakBridgeProtocol
import SpeakBridgeStore

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
    /// skipped. With `repair`, a torn last line (a write cut short by a crash, never counted) is truncated away.
    public static func scan(_ path: String, repair: Bool = false) throws(SinkError) -> [TranscriptEntry] {
        guard let dir = opendir(path) else {
            throw SinkError(message: "cannot read transcript directory \(path): \(POSIX.describe(errno))")
        }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasSuffix(".jsonl"), !name.hasPrefix(".") { names.append(String(name.dropLast(6))) }
        }
        closedir(dir)
        return names.sorted(by: >).compactMap { read(directory: path, name: $0, repair: repair) }
    }

    /// Reads `NAME.jsonl`: its first line names the (device, session), its last complete line the position.
    static func read(directory: String, name: String, repair: Bool) -> TranscriptEntry? {
        let path = "\(directory)/\(name).jsonl"
        guard var bytes = try? FileIO.read(path) else { return nil }
        if let lastBreak = bytes.lastIndex(of: 0x0A), lastBreak + 1 < bytes.count {
            bytes.removeSubrange((lastBreak + 1)...)
            if repair { truncate(path, to: bytes.count) }
        } else if !bytes.contains(0x0A) {
            if repair && !bytes.isEmpty { truncate(path, to: 0) }
            return nil
        }
        let lines = bytes.split(separator: 0x0A)
        guard let first = lines.first.flatMap(JSONLine.decode), let last = lines.last.flatMap(JSONLine.decode) else {
            return nil
        }
        return TranscriptEntry(name: name, directory: directory, device: first.device, deviceName: first.deviceName,
                               session: first.session, lines: lines.count, lastSeq: last.chunk.seq,
                               started: TranscriptFormat.started(fromName: name))
    }

    /// Cuts a torn tail off (only ever bytes after the last line feed: an uncounted, partial write).
    static func truncate(_ path: String, to length: Int) {
        let fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        guard (try? PrivatePath.checkFile(fd, path: path)) != nil else { return }
        if ftruncate(fd, off_t(length)) == 0 { fsync(fd) }
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
