#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A directory on "a disk that fails": Tests/fuse/failfs.c (FUSE, libfuse3; compiled here on first use into the
/// package's .build/failfs/) mounted over it, passing every operation through to a backing directory, except that
/// fsync(2)/fdatasync(2) of a file return EIO while `failing` is on, fsync(2) of a directory returns EIO while
/// `failingDirectories` is on (or of one directory: `failDirectorySyncs(only:)`), unlink(2) returns EIO while
/// `failingUnlinks` is on (or of some files: `failUnlinks(endingWith:)`), a write is cut short and the next ones fail
/// after `cutNextWrite(after:thenFailing:)`, and writes past a file's end get only `freeSpace` bytes (a full disk:
/// 0) while it is set. The one boundary crossed with a stand-in:
/// this VM has no device-mapper (dm-error/dm-flakey) to make a real block device fail; the FUSE mount is a real
/// filesystem the kernel talks to, so the code under test sees real failed syscalls.
///
/// No FUSE (no /dev/fuse, no libfuse3-dev or cc, not root, mount refused): `init` throws, with what to install —
/// the tests fail, never pass silently.
public final class FailingDisk: Sendable {
    public let mountPoint: String
    public let backing: String
    let control: String
    let child: SpawnedChild

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// The compiled filesystem (rebuilt when the source is newer), or why it could not be built.
    static let binary: Result<String, FailingDiskError> = {
        let source = root + "/Tests/fuse/failfs.c"
        let output = root + "/.build/failfs/failfs"
        guard access("/usr/include/fuse3/fuse.h", R_OK) == 0 else {
            return .failure(FailingDiskError("libfuse3-dev is not installed: apt-get install libfuse3-dev fuse3 "
                                             + "(make test does); the fsync-failure tests need it"))
        }
        var sourceInfo = stat(), outputInfo = stat()
        if stat(output, &outputInfo) == 0, stat(source, &sourceInfo) == 0,
           outputInfo.st_mtim.tv_sec > sourceInfo.st_mtim.tv_sec {
            return .success(output)
        }
        mkdir(root + "/.build", 0o755)
        mkdir(root + "/.build/failfs", 0o755)
        let temp = output + ".tmp-\(getpid())"
        do {
            let cc = try SpawnedChild(["/usr/bin/cc", "-O1", "-Wall", "-Werror", "-I/usr/include/fuse3", "-o", temp,
                                       source, "-lfuse3", "-lpthread"])
            let status = cc.wait(timeout: .seconds(60))
            let log = cc.output
            cc.stop()
            guard status == 0 else { return .failure(FailingDiskError("cc failfs.c failed (\(status)): \(log)")) }
        } catch {
            return .failure(FailingDiskError("cannot run /usr/bin/cc for failfs.c: \(error)"))
        }
        guard rename(temp, output) == 0 else { return .failure(FailingDiskError("rename \(temp): \(errno)")) }
        return .success(output)
    }()

    /// Mounts the failing filesystem over `mountPoint` (created 0700 if missing; the backing directory is 0700 and
    /// ours, so stat through the mount passes the daemon's owner and mode checks).
    public init(over mountPoint: String) throws {
        self.mountPoint = mountPoint
        backing = "/tmp/sbt-failfs-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(backing, 0o700)
        control = backing + ".failing"
        mkdir(mountPoint, 0o700)
        guard access("/dev/fuse", R_OK | W_OK) == 0 else {
            throw FailingDiskError("FUSE is not available (/dev/fuse: \(String(cString: strerror(errno)))): the "
                                   + "fsync failure tests need it (run as root, with the fuse3 and libfuse3-dev packages)")
        }
        let binary = try Self.binary.get()
        var environment = ProcessInfo.processInfo.environment
        environment["FAILFS_ROOT"] = backing
        environment["FAILFS_CONTROL"] = control
        child = try SpawnedChild([binary, mountPoint, "-f", "-o", "default_permissions"], environment: environment)
        let deadline = Date().addingTimeInterval(10)
        while child.isRunning && !Self.isMounted(mountPoint) && Date() < deadline { usleep(20_000) }
        guard child.isRunning, Self.isMounted(mountPoint) else {
            let log = child.output
            child.stop()
            try? FileManager.default.removeItem(atPath: backing)
            throw FailingDiskError("failfs could not mount FUSE over \(mountPoint): \(log)")
        }
    }

    public static func isMounted(_ path: String) -> Bool {
        let mounts = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
        return mounts.split(separator: "\n").contains { $0.split(separator: " ").dropFirst().first.map(String.init) == path }
    }

    private func toggle(_ path: String, _ on: Bool) {
        if on {
            _ = FileManager.default.createFile(atPath: path, contents: nil)
        } else {
            unlink(path)
        }
    }

    /// fsync and fdatasync of files fail with EIO while on.
    public var failing: Bool {
        get { access(control, F_OK) == 0 }
        set { toggle(control, newValue) }
    }

    /// fsync of directories fails with EIO while on.
    public var failingDirectories: Bool {
        get { access(control + ".dir", F_OK) == 0 }
        set { toggle(control + ".dir", newValue) }
    }

    /// From now on, fsync of the directory at `path` in the mount (e.g. "/outbox") fails with EIO, and of no other;
    /// `failingDirectories = false` ends it.
    public func failDirectorySyncs(only path: String) {
        _ = FileManager.default.createFile(atPath: control + ".dir", contents: Data(path.utf8))
    }

    /// From now on, unlink(2) fails with EIO (removing nothing) for every file whose path in the mount ends with
    /// `suffix` (every file: ""); `failingUnlinks = false` ends it.
    public func failUnlinks(endingWith suffix: String = "") {
        _ = FileManager.default.createFile(atPath: control + ".unlink", contents: Data(suffix.utf8))
    }

    /// Whether unlinks fail (`failUnlinks(endingWith:)`).
    public var failingUnlinks: Bool {
        get { access(control + ".unlink", F_OK) == 0 }
        set { if newValue { failUnlinks() } else { unlink(control + ".unlink") } }
    }

    /// The next write(2) stores only its first `bytes` bytes and returns that count (a short write; all of it if it
    /// is shorter), and the `failing` writes after it fail with EIO; then writes succeed again. A bad block under a
    /// write, then the failures that follow it.
    public func cutNextWrite(after bytes: Int, thenFailing failing: Int = 1) {
        _ = FileManager.default.createFile(atPath: control + ".short", contents: Data("\(bytes) \(failing)".utf8))
    }

    /// The bytes free on the disk (nil: no limit, the default). The part of a write past its file's end takes from
    /// them: it is cut short where they run out, and fails with ENOSPC when none of it fits; bytes written within a
    /// file's size take none (blocks already allocated, as on ext4). 0: a full disk.
    public var freeSpace: Int? {
        get { (try? String(contentsOfFile: control + ".space", encoding: .utf8)).flatMap { Int($0) } }
        set {
            if let newValue {
                _ = FileManager.default.createFile(atPath: control + ".space", contents: Data("\(newValue)".utf8))
            } else {
                unlink(control + ".space")
            }
        }
    }

    private func failed(_ kind: String) -> Int {
        ((try? String(contentsOfFile: control + ".count", encoding: .utf8)) ?? "").split(separator: "\n")
            .filter { $0.hasPrefix(kind + " ") }.count
    }

    /// How many file fsyncs failed so far (failfs counts them).
    public var failedSyncs: Int { failed("file") }

    /// How many directory fsyncs failed so far.
    public var failedDirectorySyncs: Int { failed("dir") }

    /// How many unlinks failed so far.
    public var failedUnlinks: Int { failed("unlink") }

    /// How many writes were cut short (`cutNextWrite`) or failed after one, so far.
    public var failedWrites: Int { failed("short") + failed("write") }

    /// How many writes were cut short or failed for want of `freeSpace`, so far.
    public var spaceFailures: Int { failed("space") }

    /// Unmounts (lazily, if something still holds it), stops failfs and removes the backing directory.
    public func unmount() {
        failing = false
        failingDirectories = false
        failingUnlinks = false
        freeSpace = nil
        unlink(control + ".short")
        if umount(mountPoint) != 0 { umount2(mountPoint, Int32(MNT_DETACH)) }
        _ = child.wait(timeout: .seconds(5))  // exits once unmounted; SIGTERM past that
        child.stop()
        try? FileManager.default.removeItem(atPath: backing)
        unlink(control + ".count")
    }
}

public struct FailingDiskError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
