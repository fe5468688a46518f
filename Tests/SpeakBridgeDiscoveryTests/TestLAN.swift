// Test helpers: the private LAN made by Tests/netns/lan.sh, child processes, waiting.
import Foundation
import SpeakBridgeTestSupport
import Testing
import Glibc
import SpeakBridgeSupport

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


typealias ChildProcess = SpawnedChild

extension SpawnedChild {
    convenience init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        try self.init([executable] + arguments, environment: environment)
    }

    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                    timeout: Duration) throws -> ChildResult {
        let child = try ChildProcess(executable, arguments, environment: environment)
        let status = child.wait(timeout: timeout)
        let result = ChildResult(status: status, output: child.output)
        child.stop()
        return result
    }
}

/// Collects values delivered on another thread.
final class Recorder<Value: Sendable>: Sendable {
    private let values = Locked<[Value]>([])
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
