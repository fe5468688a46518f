#if canImport(Glibc)
import Glibc
#endif

/// Per-stage timestamps for the benchmark: where each microsecond of a line goes (stdin read → journal →
/// encrypt → socket → decrypt and ledger → progress → sink write → fsync → ack). Off unless
/// `SPEAKBRIDGE_TRACE=FILE` is set when the process starts; off, a mark costs one load and one branch.
///
/// Every mark is one line `STAGE NANOSECONDS VALUE\n` appended with one write(2) (O_APPEND, so a sender and a
/// desktop on the same machine can share one file): NANOSECONDS is CLOCK_MONOTONIC (one clock for every process
/// of the machine), VALUE the chunk's seq where the stage knows it, else 0. No text of a line is ever written.
/// `Tests/bench/stages.py` turns a file into a per-stage table.
public enum Trace {
    /// The trace file's descriptor, -1 when tracing is off. Opened once, on first use, by `open(path:)`.
    public static let fd: Int32 = {
        guard let path = getenv("SPEAKBRIDGE_TRACE"), path.pointee != 0 else { return -1 }
        let opened = open(path: String(cString: path))
        if let problem = opened.problem {
            Console.warning("SPEAKBRIDGE_TRACE: \(problem); tracing is off")
        }
        return opened.fd
    }()

    /// Opens (or creates, 0600) the trace file for appending, or says why not. The file tells when and how much a
    /// user dictates, so it must be a regular file of this user that no one else can read or write: O_NOFOLLOW
    /// refuses a planted symlink, O_NONBLOCK a planted FIFO (which would otherwise hang the process at its first
    /// mark), and the open descriptor is checked, so a file someone else made at the path is not appended to.
    public static func open(path: String) -> (fd: Int32, problem: String?) {
        let shown = PeerText.escape(path)
        let fd = Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return (-1, "cannot open \(shown): \(String(cString: strerror(errno)))") }
        var info = stat()
        let problem: String?
        if fstat(fd, &info) != 0 {
            problem = "cannot check \(shown): \(String(cString: strerror(errno)))"
        } else if info.st_mode & S_IFMT != S_IFREG {
            problem = "\(shown) is not a regular file"
        } else if info.st_uid != geteuid() {
            problem = "\(shown) belongs to uid \(info.st_uid), not this user"
        } else if info.st_mode & 0o077 != 0 {
            problem = "\(shown) is readable or writable by others (mode \(String(info.st_mode & 0o777, radix: 8)))"
        } else {
            problem = nil
        }
        guard let problem else { return (fd, nil) }
        close(fd)
        return (-1, problem)
    }

    @inline(__always)
    public static func mark(_ stage: StaticString, _ value: UInt64 = 0) {
        if fd >= 0 { write(stage, value) }
    }

    @inline(never)
    static func write(_ stage: StaticString, _ value: UInt64) {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let ns = UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 96) { buffer in
            var n = 0
            // Stage names are short literals of ours; cut at 40 bytes so the line always fits.
            stage.withUTF8Buffer { name in
                for byte in name.prefix(40) {
                    buffer[n] = byte
                    n += 1
                }
            }
            buffer[n] = 0x20
            n += 1
            n = decimal(ns, into: buffer, at: n)
            buffer[n] = 0x20
            n += 1
            n = decimal(value, into: buffer, at: n)
            buffer[n] = 0x0A
            n += 1
            _ = Glibc.write(fd, buffer.baseAddress, n)  // best effort: a lost mark only thins the table
        }
    }

    /// Writes `v` in decimal at `at` (at most 20 digits); returns the index after it.
    static func decimal(_ v: UInt64, into buffer: UnsafeMutableBufferPointer<UInt8>, at: Int) -> Int {
        var width = 1
        var probe = v
        while probe >= 10 {
            probe /= 10
            width += 1
        }
        var rest = v
        var i = at + width
        while i > at {
            i -= 1
            buffer[i] = UInt8(truncatingIfNeeded: rest % 10) &+ 0x30
            rest /= 10
        }
        return at + width
    }
}
