import Foundation
import Glibc
@testable import SpeakBridgeSinks
import SpeakBridgeSupport
import SpeakBridgeTestSupport

/// A private headless Wayland compositor for tests: sway (wlroots: has the virtual-keyboard protocol) or weston
/// (has not). Its runtime directory is a fresh private one. It runs as the test's user, as the sinks require of a
/// compositor they type into (`DisplayProbe.connectWayland`: this user or root). sway refuses to run as root (it
/// exits when it could regain uid 0), so as root both run in a user namespace of their own (`unshare --user`,
/// from util-linux) as its uid 1000, which is root outside it: the kernel reports root as the peer of their
/// sockets, and they own their files as root, yet they cannot become root. `foreign` runs them as "nobody"
/// instead (through setpriv; needs root), in a directory owned by nobody, for the tests of another user's
/// compositor; the test, being root, can still connect to the socket. `startFoot` opens a foot terminal that
/// records its keyboard input byte for byte (as `XtermWindow` does). Everything is stopped by PID.
final class WaylandCompositor {
    enum Kind: String { case sway, weston }

    /// Nil when a compositor of `kind` can be started here (as another user when `foreign`), else the one-line
    /// reason to skip.
    static func unavailable(_ kind: Kind, foreign: Bool = false) -> String? {
        guard systemTool(kind.rawValue) != nil else { return "\(kind.rawValue) is not installed (make test installs it)" }
        if kind == .sway, systemTool("foot") == nil || systemTool("wtype") == nil { return "foot or wtype is not installed" }
        if foreign {
            guard geteuid() == 0, systemTool("setpriv") != nil, getpwnam("nobody") != nil else {
                return "needs root, setpriv and the user nobody to run a compositor as another user"
            }
        } else if geteuid() == 0, !canUnshareUser {
            return "running as root: sway refuses root, and no user namespace (unshare --user) to run it as root's peer"
        }
        return nil
    }

    /// Whether `unshare --user` can make a user namespace here (a container may forbid it).
    static let canUnshareUser: Bool = {
        guard let unshare = systemTool("unshare"),
              let tool = try? SpawnedChild([unshare, "--user", "--map-user=1000", "--map-group=1000", "--", "/bin/true"])
        else { return false }
        defer { tool.stop() }
        return tool.wait(timeout: .seconds(10)) == 0
    }()

    let foreign: Bool

    let runtimeDirectory: String
    private(set) var socketName = ""
    private var processes: [Process] = []
    private let directory: TemporaryDirectory
    private var foots = 0

    /// What the sinks and tools get: the compositor's socket (and sway's IPC socket) and nothing of X11.
    var environment: [String: String] {
        var environment = ["WAYLAND_DISPLAY": socketName, "XDG_RUNTIME_DIR": runtimeDirectory, "PATH": "/usr/bin:/bin"]
        if let ipc = swaySocket { environment["SWAYSOCK"] = ipc }
        return environment
    }

    /// sway's IPC socket (sway-ipc.UID.PID.sock in the runtime directory), nil for weston.
    var swaySocket: String? {
        (try? FileManager.default.contentsOfDirectory(atPath: runtimeDirectory))?
            .first { $0.hasPrefix("sway-ipc.") && $0.hasSuffix(".sock") }
            .map { "\(runtimeDirectory)/\($0)" }
    }

    /// Focuses the window with this app id (sway only).
    func focus(appID: String) throws {
        let tool = Process()
        tool.executableURL = URL(fileURLWithPath: try systemTool("swaymsg").orThrow("swaymsg is not installed"))
        tool.arguments = ["-s", try swaySocket.orThrow("not sway"), "[app_id=\"\(appID)\"] focus"]
        tool.standardOutput = FileHandle.nullDevice
        tool.standardError = FileHandle.nullDevice
        try tool.run()
        tool.waitUntilExit()
        guard tool.terminationStatus == 0 else { throw TestFailure("swaymsg focus \(appID) failed") }
    }

    init(_ kind: Kind, foreign: Bool = false) throws {
        self.foreign = foreign
        directory = TemporaryDirectory()
        runtimeDirectory = directory.path
        if foreign, let nobody = getpwnam("nobody") {
            chown(runtimeDirectory, nobody.pointee.pw_uid, nobody.pointee.pw_gid)
        }
        chmod(runtimeDirectory, 0o700)
        let arguments: [String]
        switch kind {
        case .sway:
            let config = "\(runtimeDirectory)/sway.config"
            try "xwayland disable\noutput HEADLESS-1 resolution 800x600\n".write(toFile: config, atomically: true, encoding: .utf8)
            chmod(config, 0o644)
            arguments = ["sway", "-c", config]
        case .weston:
            arguments = ["weston", "--backend=headless-backend.so", "--socket=wayland-test", "--no-config"]
        }
        processes.append(try spawn(arguments, environment: [
            "WLR_BACKENDS": "headless", "WLR_LIBINPUT_NO_DEVICES": "1", "WLR_RENDERER": "pixman",
        ]))
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(20))
        // Ready once a connect succeeds: the socket file appears at bind(2), a moment before listen(2) (a connect
        // in between is refused; seen under load), and a compositor that died after binding leaves the file too.
        var found: String?
        while found == nil, clock.now < deadline {
            found = (try? FileManager.default.contentsOfDirectory(atPath: runtimeDirectory))?
                .first { $0.hasPrefix("wayland-") && !$0.hasSuffix(".lock") }
                .flatMap { name in
                    // A connect (closed at once), nil while refused. Not the sinks' probe: it refuses a foreign one.
                    UnixAddress("\(runtimeDirectory)/\(name)")?.connectedStream().map { fd in
                        close(fd)
                        return name
                    }
                }
            if found == nil { sleepFor(.milliseconds(20)) }
        }
        guard let found else {
            stop()
            throw TestFailure("\(kind.rawValue) did not listen on its Wayland socket within 20 s")
        }
        socketName = found
    }

    /// Starts foot running `cat` into a file (as the compositor's user) and waits until it runs; sway gives a new
    /// window the focus. Returns the file's path. (foot keeps the title it is given: `--title` sets it, and the
    /// shell inside does not change it.)
    func startFoot(appID: String = "foot", title: String = "foot") throws -> String {
        foots += 1
        let record = "\(runtimeDirectory)/typed-\(foots)"
        let script = "stty -icanon -echo min 1 time 0; exec cat > \(record)"
        processes.append(try spawn(["foot", "--app-id=\(appID)", "--title=\(title)", "/bin/sh", "-c", script],
                                   environment: ["LC_ALL": "C.UTF-8"]))
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(20))
        while !FileManager.default.fileExists(atPath: record), clock.now < deadline { sleepFor(.milliseconds(20)) }
        guard FileManager.default.fileExists(atPath: record) else { throw TestFailure("foot did not start") }
        sleepFor(.milliseconds(200))  // the window is mapped and focused once the compositor has configured it
        return record
    }

    /// The clipboard's text as wl-paste (run as the compositor's user) reads it, waiting up to `patience` for it to
    /// equal `expected`; nil when wl-paste finds none.
    func selection(expecting expected: String, patience: Duration = .seconds(30)) throws -> String? {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: patience)
        var last: String?
        repeat {
            let output = "\(runtimeDirectory)/paste-\(UInt32.random(in: 0 ... .max))"
            let paste = try spawn(["/bin/sh", "-c", "exec wl-paste --no-newline > \(output)"], environment: [:])
            paste.waitUntilExit()
            last = paste.terminationStatus == 0 ? FileManager.default.contents(atPath: output).map {
                String(decoding: $0, as: UTF8.self)
            } : nil
            unlink(output)
            if last == expected { break }
            sleepFor(.milliseconds(50))
        } while clock.now < deadline
        return last
    }

    /// What `record` holds, waiting up to `patience` for it to equal `expected`.
    func received(_ record: String, expecting expected: String, patience: Duration = .seconds(30)) -> String {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: patience)
        var last = ""
        repeat {
            last = String(decoding: FileManager.default.contents(atPath: record) ?? Data(), as: UTF8.self)
            if last == expected { break }
            sleepFor(.milliseconds(20))
        } while clock.now < deadline
        return last
    }

    private func spawn(_ command: [String], environment extra: [String: String]) throws -> Process {
        let process = Process()
        var arguments = command
        if foreign {
            arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups"] + arguments
            process.executableURL = URL(fileURLWithPath: try systemTool("setpriv").orThrow("setpriv is not installed"))
        } else if geteuid() == 0 {
            arguments = ["--user", "--map-user=1000", "--map-group=1000", "--"] + arguments
            process.executableURL = URL(fileURLWithPath: try systemTool("unshare").orThrow("unshare is not installed"))
        } else {
            process.executableURL = URL(fileURLWithPath: try systemTool(arguments.removeFirst()).orThrow("not installed"))
        }
        process.arguments = arguments
        var environment = ["XDG_RUNTIME_DIR": runtimeDirectory, "HOME": runtimeDirectory, "PATH": "/usr/bin:/bin"]
        if !socketName.isEmpty { environment["WAYLAND_DISPLAY"] = socketName }
        for (key, value) in extra { environment[key] = value }
        process.environment = environment
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        var unmasked = sigset_t(), previous = sigset_t()  // see XvfbServer: spawn with no blocked signals
        sigemptyset(&unmasked)
        pthread_sigmask(SIG_SETMASK, &unmasked, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        try process.run()
        return process
    }

    func stop() {
        for process in processes.reversed() where process.isRunning {
            kill(process.processIdentifier, SIGTERM)
        }
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(5))
        for process in processes.reversed() {
            while process.isRunning, clock.now < deadline { sleepFor(.milliseconds(20)) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        processes.removeAll()
        directory.remove()
    }
}
