#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// A child process (posix_spawn) with stdout and stderr in a temporary file and, optionally, `stdin` text
/// written to a pipe that is then closed.
///
/// Not Foundation's Process: Swift Testing runs tests on worker threads that block nearly every signal, and a
/// spawned child inherits that mask, so SIGTERM would never reach it. Here the child starts with an empty signal
/// mask and default dispositions, and `stop()` signals this child's PID only.
final class Child: Sendable {
    let pid: pid_t
    let outputPath: String
    private let exitStatus = Mutex<Int32?>(nil)

    init(_ argv: [String], environment: [String: String], stdin: String? = nil) throws {
        outputPath = NSTemporaryDirectory() + "speakbridge-keyring-test-\(UUID().uuidString).log"
        var fds: [Int32] = [-1, -1]
        if stdin != nil { guard pipe(&fds) == 0 else { throw ChildError("pipe: \(errno)") } }

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
            throw ChildError("posix_spawn \(argv[0]): \(String(cString: strerror(error)))")
        }
        self.pid = pid
        if let stdin {
            let bytes = Array(stdin.utf8)
            _ = bytes.withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) }
            close(fds[1])
        }
    }

    var output: String {
        (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    }

    var isRunning: Bool { reap(block: false) == nil }

    /// Waits up to `timeout` for the child to exit; past it, SIGTERM to its PID.
    func wait(timeout: Duration = .seconds(10)) -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while reap(block: false) == nil && ContinuousClock.now < deadline { usleep(10_000) }
        return reap(block: false) ?? stop()
    }

    /// SIGTERM to this child's PID (SIGKILL after 5 s), reaped, output file removed.
    @discardableResult
    func stop() -> Int32 {
        if let status = reap(block: false) { return finish(status) }
        kill(pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(5)
        while reap(block: false) == nil && ContinuousClock.now < deadline { usleep(10_000) }
        if reap(block: false) == nil {
            kill(pid, SIGKILL)
            _ = reap(block: true)
        }
        return finish(reap(block: false) ?? -1)
    }

    private func finish(_ status: Int32) -> Int32 {
        unlink(outputPath)
        return status
    }

    private func reap(block: Bool) -> Int32? {
        exitStatus.withLock { saved in
            if let saved { return saved }
            var status: Int32 = 0
            let r = waitpid(pid, &status, block ? 0 : WNOHANG)
            guard r == pid else { return nil }
            let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            saved = code
            return code
        }
    }
}

struct ChildError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs a short command to completion: (exit status, stdout+stderr).
func run(_ argv: [String], environment: [String: String], stdin: String? = nil) throws -> (status: Int32, output: String) {
    let child = try Child(argv, environment: environment, stdin: stdin)
    let status = child.wait()
    let output = child.output
    unlink(child.outputPath)
    return (status, output)
}
