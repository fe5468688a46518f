#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A directory on "a disk that fails": Tests/python/failfs.py (FUSE, python3-fuse) mounted over it, passing every
/// operation through to a backing directory, except that fsync(2)/fdatasync(2) of a file return EIO while
/// `failing` is on. The one boundary crossed with a stand-in: this VM has no device-mapper (dm-error/dm-flakey) to
/// make a real block device fail; the FUSE mount is a real filesystem the kernel talks to, so the binary under test
/// sees real failed syscalls. Directory fsyncs never fail on it (see failfs.py).
///
/// No FUSE (no /dev/fuse, no python3-fuse, not root, mount refused): `init` throws, with what to install — the
/// tests fail, never pass silently.
final class FailingDisk: @unchecked Sendable {
    let mountPoint: String
    let backing: String
    let control: String
    let process = Process()

    static let script: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent("Tests/python/failfs.py").path
    }()

    /// Mounts the failing filesystem over `mountPoint` (created 0700 if missing; the backing directory is 0700 and
    /// ours, so stat through the mount passes the daemon's owner and mode checks).
    init(over mountPoint: String) throws {
        self.mountPoint = mountPoint
        backing = Harness.tempDir("failfs")
        control = backing + ".failing"
        mkdir(mountPoint, 0o700)
        guard access("/dev/fuse", R_OK | W_OK) == 0 else {
            throw HarnessError("FUSE is not available (/dev/fuse: \(String(cString: strerror(errno)))): the fsync "
                               + "failure tests need it (run as root, with the fuse3 and python3-fuse packages)")
        }
        guard FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/fuse.py") else {
            throw HarnessError("python3-fuse is not installed: apt-get install python3-fuse fuse3 (make test does)")
        }
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [Self.script, mountPoint, "-f", "-o", "default_permissions"]
        var environment = ProcessInfo.processInfo.environment
        environment["FAILFS_ROOT"] = backing
        environment["FAILFS_CONTROL"] = control
        process.environment = environment
        let log = backing + ".log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: log)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        do {
            try Harness.wait("the FUSE mount at \(mountPoint)", timeout: 10) {
                !process.isRunning || Self.isMounted(mountPoint)
            }
        } catch {
            process.terminate()
            throw error
        }
        guard process.isRunning else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw HarnessError("failfs.py could not mount FUSE over \(mountPoint): \(text)")
        }
    }

    static func isMounted(_ path: String) -> Bool {
        let mounts = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
        return mounts.split(separator: "\n").contains { $0.split(separator: " ").dropFirst().first.map(String.init) == path }
    }

    /// fsync and fdatasync of files fail with EIO while on.
    var failing: Bool {
        get { access(control, F_OK) == 0 }
        set {
            if newValue {
                _ = FileManager.default.createFile(atPath: control, contents: nil)
            } else {
                unlink(control)
            }
        }
    }

    /// How many fsyncs failed so far (failfs.py counts them).
    var failedSyncs: Int {
        ((try? String(contentsOfFile: control + ".count", encoding: .utf8)) ?? "").split(separator: "\n").count
    }

    /// Unmounts (lazily, if something still holds it) and removes the backing directory.
    func unmount() {
        failing = false
        if umount(mountPoint) != 0 { umount2(mountPoint, Int32(MNT_DETACH)) }
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate() }
        try? FileManager.default.removeItem(atPath: backing)
        unlink(control + ".count")
        unlink(backing + ".log")
    }
}

/// What a `send` journal holds: its acknowledged level and the chunks above it, in order (as `Outbox.load` reads it).
struct JournalContents {
    var acked: UInt64 = 0
    var pendingTexts: [String] = []

    init(directory: String) {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        guard let name = files.first(where: { $0.hasSuffix(".journal") }),
              let data = FileManager.default.contents(atPath: directory + "/" + name) else { return }
        var chunks: [(UInt64, String)] = []
        for line in data.split(whereSeparator: { $0 == 0x0A || $0 == 0 }) {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else { continue }
            if let level = object["acked"] as? Int { acked = max(acked, UInt64(level)) }
            if let level = object["a"] as? Int { acked = max(acked, UInt64(level)) }
            if let chunk = object["c"] as? [String: Any], let seq = chunk["seq"] as? Int, let text = chunk["text"] as? String {
                chunks.append((UInt64(seq), text))
            }
        }
        pendingTexts = chunks.filter { $0.0 > acked }.map(\.1)
    }
}
