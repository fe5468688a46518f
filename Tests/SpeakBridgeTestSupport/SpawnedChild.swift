#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeSupport

/// A child process for tests (posix_spawn), with stdout and stderr in a temporary file and, optionally, `stdin`
/// text written to a pipe that is then closed.
///
/// Not Foundation's Process: Swift Testing runs tests on worker threads that block nearly every signal, and a
/// spawned child inherits that mask, so SIGTERM would never reach it (a child that ignores SIGTERM also makes
/// Process.waitUntilExit spin). Here the child starts with an empty signal mask and default dispositions, and
/// `stop()` signals this child's PID only.
public final class SpawnedChild: Sendable {
    public let pid: pid_t
    public let outputPath: String
    private let exitStatus = Locked<Int32?>(nil)

    /// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34; Swift's Glibc module does not declare it): the child
    /// closes every descriptor from `low` on. Looked up once; without it (an older libc) nothing is added.
    static func closeFrom(_ low: Int32, _ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = closeFromSymbol else { return }
        _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, low)
    }

    // nonisolated(unsafe): a constant address of libc's code, written once by the lazy initializer (which Swift runs
    // once, under its own lock) and only read after.
    nonisolated(unsafe) static let closeFromSymbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")

    public init(_ argv: [String], environment: [String: String]? = nil, stdin: String? = nil) throws {
        outputPath = NSTemporaryDirectory() + "speakbridge-test-\(UUID().uuidString).log"
        var fds: [Int32] = [-1, -1]
        if stdin != nil { guard pipe(&fds) == 0 else { throw SpawnError("pipe: \(errno)") } }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if stdin != nil {
            posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
            posix_spawn_file_actions_addclose(&actions, fds[0])
            posix_spawn_file_actions_addclose(&actions, fds[1])
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of this process: posix_spawn passes every descriptor not marked close-on-exec, and a
        // long-lived child (the FUSE filesystem of `FailingDisk`, 30 s and more) kept the write end of another
        // test's pipe open, so that test's `send` never saw the end of its input (2026-12-07).
        Self.closeFrom(3, &actions)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let environment = environment ?? ProcessInfo.processInfo.environment
        let cArgv = argv.map { strdup($0) } + [nil]
        let cEnv = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            cArgv.forEach { free($0) }
            cEnv.forEach { free($0) }
        }
        var pid: pid_t = 0
        let error = posix_spawn(&pid, argv[0], &actions, &attributes, cArgv, cEnv)
        if stdin != nil { close(fds[0]) }
        guard error == 0 else {
            if stdin != nil { close(fds[1]) }
            throw SpawnError("posix_spawn \(argv[0]): \(String(cString: strerror(error)))")
        }
        self.pid = pid
        if let stdin {
            let bytes = Array(stdin.utf8)
            _ = bytes.withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) }
            close(fds[1])
        }
    }

    public var isRunning: Bool { reap(block: false) == nil }

    /// What the child wrote so far. Plain read(2): FoundationEssentials' String(contentsOfFile:) leaks a 4 KiB
    /// buffer on empty files (seen with ASan, Swift 6.3.1).
    public var output: String {
        let fd = open(outputPath, O_RDONLY)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            bytes += chunk[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Waits up to `timeout` for the child to exit; past it, SIGTERM to its PID (SIGKILL after 5 s).
    /// The output file stays until `stop()`.
    public func wait(timeout: Duration = .seconds(10)) -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while reap(block: false) == nil && ContinuousClock.now < deadline { usleep(10_000) }
        return reap(block: false) ?? terminate()
    }

    /// SIGTERM to this child's PID (SIGKILL after 5 s), reaped, output file removed.
    @discardableResult
    public func stop() -> Int32 {
        let status = reap(block: false) ?? terminate()
        unlink(outputPath)
        return status
    }

    private func terminate() -> Int32 {
        kill(pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            if let status = reap(block: false) { return status }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        return reap(block: true) ?? -1
    }

    /// The exit status (128+signal if killed), once the child has ended; nil while it runs.
    private func reap(block: Bool) -> Int32? {
        exitStatus.withLock { known in
            if let known { return known }
            var raw: Int32 = 0
            guard waitpid(pid, &raw, block ? 0 : WNOHANG) == pid else { return nil }
            let status = raw & 0x7F == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
            known = status
            return status
        }
    }
}

public struct SpawnError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
