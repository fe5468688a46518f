#if canImport(Glibc)
import Glibc
#endif
import Testing
import SpeakBridgeSupport

/// The per-stage trace file (`SPEAKBRIDGE_TRACE`) tells when and how much a user dictates: it is appended to only
/// when it is a private regular file of this user, and a FIFO or a symlink planted at the path never hangs or
/// redirects the process.
@Suite("The trace file is trusted only when it is the user's own", .serialized)
struct TraceFileTests {
    let dir = "/tmp/sb-trace-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    init() { _ = mkdir(dir, 0o700) }

    private func clean() {
        for name in ["t", "fifo", "link", "open", "theirs"] { _ = unlink(dir + "/" + name) }
        _ = rmdir(dir)
    }

    @Test func ownFileIsCreatedPrivateAndAppended() {
        defer { clean() }
        let path = dir + "/t"
        let first = Trace.open(path: path)
        #expect(first.problem == nil && first.fd >= 0)
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        close(first.fd)
        let again = Trace.open(path: path)  // an existing file of ours: appended to, as sender and desktop share one
        #expect(again.problem == nil && again.fd >= 0)
        close(again.fd)
    }

    @Test func plantedFIFOIsRefusedWithoutHanging() throws {
        defer { clean() }
        let path = dir + "/fifo"
        #expect(mkfifo(path, 0o600) == 0)
        // Before: open(O_WRONLY) on a FIFO without a reader blocked the process at its first mark, for ever.
        let opened = Trace.open(path: path)
        #expect(opened.fd == -1)
        #expect(opened.problem != nil)
    }

    @Test func symlinkIsRefused() {
        defer { clean() }
        let target = dir + "/t"
        #expect(creat(target, 0o600) >= 0)
        #expect(symlink(target, dir + "/link") == 0)
        let opened = Trace.open(path: dir + "/link")
        #expect(opened.fd == -1 && opened.problem?.contains("cannot open") == true)
    }

    @Test func fileOthersCanReadIsRefused() {
        defer { clean() }
        let path = dir + "/open"
        let fd = creat(path, 0o600)
        #expect(fd >= 0)
        #expect(fchmod(fd, 0o644) == 0)
        close(fd)
        let opened = Trace.open(path: path)
        #expect(opened.fd == -1 && opened.problem?.contains("mode 644") == true)
    }

    @Test(.enabled(if: geteuid() == 0, "needs root to make a file of another user"))
    func anotherUsersFileIsRefused() {
        defer { clean() }
        let path = dir + "/theirs"
        let fd = creat(path, 0o600)
        #expect(fd >= 0)
        #expect(fchown(fd, 65534, 65534) == 0)
        close(fd)
        let opened = Trace.open(path: path)
        #expect(opened.fd == -1 && opened.problem?.contains("uid 65534") == true)
    }
}
