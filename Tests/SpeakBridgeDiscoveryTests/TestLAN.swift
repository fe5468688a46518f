// Test helpers: the private LAN made by Tests/netns/lan.sh, child processes, waiting.
import Foundation
import Testing
import Glibc
import Synchronization

/// The test LAN as Tests/netns/run-discovery-tests.sh describes it in the environment. This test
/// process runs in host `me`; peers are reached through `lan.sh exec`.
struct TestLAN: Sendable {
    let script: String
    let me: String
    let peer: String
    let peer2: String?
    let zeroconfPython: String?
    let zeroconfSkipReason: String

    static let current: TestLAN? = {
        let env = ProcessInfo.processInfo.environment
        guard env["SPEAKBRIDGE_NETNS"] != nil,
              let script = env["SPEAKBRIDGE_LAN_SCRIPT"], let me = env["SPEAKBRIDGE_LAN_ME"],
              let peer = env["SPEAKBRIDGE_LAN_PEER"] else { return nil }
        let python = env["SPEAKBRIDGE_ZEROCONF_PYTHON"].flatMap { $0.isEmpty ? nil : $0 }
        return TestLAN(script: script, me: me, peer: peer,
                       peer2: env["SPEAKBRIDGE_LAN_PEER2"].flatMap { $0.isEmpty ? nil : $0 },
                       zeroconfPython: python,
                       zeroconfSkipReason: env["SPEAKBRIDGE_ZEROCONF_SKIP"] ?? "python zeroconf not set up by the runner")
    }()

    static let skipReason: Comment =
        "needs the private test LAN (as root: bash Tests/netns/run-discovery-tests.sh); SPEAKBRIDGE_NETNS is not set"

    /// `lan.sh ARGS…`, waited for.
    @discardableResult
    func lan(_ arguments: [String], timeout: Duration = .seconds(30)) throws -> ChildResult {
        try ChildProcess.run(script, arguments, timeout: timeout)
    }

    /// CMD run in `host` through `lan.sh exec`, waited for.
    func run(on host: String, _ command: [String], timeout: Duration = .seconds(30)) throws -> ChildResult {
        try lan(["exec", host] + command, timeout: timeout)
    }

    /// CMD started in `host` and left running; stop it with `stop()`. `lan.sh exec` exec()s into
    /// `ip netns exec`, which exec()s CMD, so the PID is CMD's own.
    func spawn(on host: String, _ command: [String]) throws -> ChildProcess {
        try ChildProcess(script, ["exec", host] + command)
    }

    func address(of host: String) throws -> String {
        try lan(["address", host]).output.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

struct ChildResult: Sendable {
    var status: Int32
    var output: String
}

/// A child process (posix_spawn) whose stdout and stderr go to a temporary file.
///
/// Not Foundation's Process: Swift Testing runs tests on dispatch worker threads, which block
/// nearly every signal, and a spawned child inherits that mask, so SIGTERM would never reach it
/// (avahi-publish-service would outlive its test). Here the child starts with an empty signal
/// mask and default dispositions. Waiting polls waitpid with WNOHANG.
final class ChildProcess: Sendable {
    let pid: pid_t
    private let outputPath: String
    private let exitStatus = Mutex<Int32?>(nil)

    init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        outputPath = FileManager.default.temporaryDirectory
            .appendingPathComponent("speakbridge-test-\(UUID().uuidString).log").path

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
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

        let environment = environment ?? ProcessInfo.processInfo.environment
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let error = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard error == 0 else {
            throw NSError(domain: NSPOSIXErrorDomain, code: Int(error),
                          userInfo: [NSLocalizedDescriptionKey: "posix_spawn \(executable): \(String(cString: strerror(error)))"])
        }
        self.pid = pid
    }

    var isRunning: Bool { reap(block: false) == nil }

    /// What the child wrote so far. Plain read(2): FoundationEssentials' String(contentsOfFile:)
    /// leaks a 4 KiB buffer on empty files (seen with ASan, Swift 6.3.1).
    var output: String {
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

    /// Waits up to `timeout`; past it the child gets SIGTERM (then SIGKILL after 5 s).
    func wait(timeout: Duration) -> ChildResult {
        let deadline = ContinuousClock.now + timeout
        while reap(block: false) == nil && ContinuousClock.now < deadline {
            usleep(20_000)
        }
        let status = reap(block: false) ?? terminate()
        return ChildResult(status: status, output: output)
    }

    /// SIGTERM to this child's PID and nothing else, wait for it, remove its output file.
    @discardableResult
    func stop() -> Int32 {
        let status = reap(block: false) ?? terminate()
        try? FileManager.default.removeItem(atPath: outputPath)
        return status
    }

    private func terminate() -> Int32 {
        kill(pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            if let status = reap(block: false) { return status }
            usleep(20_000)
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

    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                    timeout: Duration) throws -> ChildResult {
        let child = try ChildProcess(executable, arguments, environment: environment)
        let result = child.wait(timeout: timeout)
        child.stop()
        return result
    }
}

/// Collects values delivered on another thread.
final class Recorder<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])
    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
}

/// Polls `condition` every 50 ms until it holds or `timeout` passes; returns whether it held.
func eventually(_ timeout: Duration = .seconds(10), _ condition: () throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return try condition()
}

/// A service name no other test (or earlier run) uses.
func uniqueName(_ base: String) -> String {
    "\(base)-\(UInt32.random(in: 0..<1_000_000))"
}
