import Foundation
import SpeakBridgeTestSupport
import Glibc

/// A private X server for tests: `Xvfb -displayfd` picks a free display number itself (no guessing, no races with
/// other servers on this machine); TCP is off. `stop()` ends it by its PID.
final class XvfbServer {
    static let executable = systemTool("Xvfb")

    let display: String
    let runAs: uid_t?
    private let process: Process
    /// The number `stoppedWhileUsed` chose (nil: Xvfb chose it): its leftovers are removed at `stop`.
    private var chosenNumber: Int?

    /// `stoppedWhileUsed`: for a test that stops the server while a sink still points at it. Such a server takes
    /// a display number far above those `-displayfd` picks (the lowest free): a low number freed by `stop()` is soon
    /// taken by another suite's server, and the sink would reach that live display instead of a dead one.
    /// `runAs`: the server runs as that user (through setpriv; the caller must be root), for the tests of a
    /// display another user serves.
    /// `number`: serve that display (one a stopped `stoppedWhileUsed` server had, to stand in its place).
    init(stoppedWhileUsed: Bool = false, runAs uid: uid_t? = nil, number chosen: Int? = nil) throws {
        self.runAs = uid
        if stoppedWhileUsed || chosen != nil {
            let number = chosen ?? ChosenDisplay.unused()
            let process = try Self.spawn([":\(number)"], output: FileHandle.nullDevice, runAs: uid)
            self.process = process
            display = ":\(number)"
            let clock = ContinuousClock()
            let deadline = clock.now.advanced(by: .seconds(20))
            while process.isRunning, !ChosenDisplay.hasSocket(number), clock.now < deadline {
                sleepFor(.milliseconds(20))
            }
            guard process.isRunning, ChosenDisplay.hasSocket(number) else {
                stop()
                throw TestFailure("Xvfb did not start on \(display)")
            }
            chosenNumber = number  // listening: its leftovers are this server's to remove at `stop`
            return
        }
        let output = Pipe()
        let process = try Self.spawn(["-displayfd", "1"], output: output, runAs: uid)
        self.process = process
        let announced = readUntil(fd: output.fileHandleForReading.fileDescriptor, deadline: .seconds(20)) {
            $0.contains(0x0A)
        }
        let number = String(decoding: announced, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !number.isEmpty, number.allSatisfy(\.isNumber) else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw TestFailure("Xvfb did not announce a display (got \(number.debugDescription))")
        }
        display = ":\(number)"
    }

    private static func spawn(_ display: [String], output: Any, runAs uid: uid_t?) throws -> Process {
        let process = Process()
        let xvfb = try Self.executable.orThrow("Xvfb is not installed")
        let arguments = display + ["-nolisten", "tcp", "-noreset", "-screen", "0", "640x480x24"]
        if let uid {
            process.executableURL = URL(fileURLWithPath: try systemTool("setpriv").orThrow("setpriv is not installed"))
            process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--", xvfb] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: xvfb)
            process.arguments = arguments
        }
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        // Foundation's Process hands the calling thread's signal mask to the child, and test threads are
        // libdispatch workers that block nearly all signals: Xvfb would then ignore SIGTERM. Spawn unmasked.
        var unmasked = sigset_t(), previous = sigset_t()
        sigemptyset(&unmasked)
        pthread_sigmask(SIG_SETMASK, &unmasked, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        try process.run()
        return process
    }

    /// Environment for sinks and tools talking to this server.
    var environment: [String: String] { ["DISPLAY": display, "PATH": "/usr/bin:/bin"] }

    func stop() {
        let pid = process.processIdentifier
        kill(pid, SIGTERM)
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(5))
        while process.isRunning, clock.now < deadline { sleepFor(.milliseconds(20)) }
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
        if let chosenNumber { ChosenDisplay.removeLeftovers(chosenNumber) }
    }

    /// The selection's content as `xclip -o` reads it, waiting up to `patience` for it to equal `expected`
    /// (the selection owner the sink started may take a moment to announce itself to the server).
    func selection(primary: Bool, expecting expected: String, patience: Duration = .seconds(30)) -> String? {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: patience)
        var last: String?
        repeat {
            last = readSelection(primary: primary)
            if last == expected { return last }
            sleepFor(.milliseconds(50))
        } while clock.now < deadline
        return last
    }

    private func readSelection(primary: Bool) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/xclip")
        process.arguments = ["-o", "-selection", primary ? "primary" : "clipboard"]
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension Optional {
    func orThrow(_ message: String) throws -> Wrapped {
        guard let value = self else { throw TestFailure(message) }
        return value
    }
}
