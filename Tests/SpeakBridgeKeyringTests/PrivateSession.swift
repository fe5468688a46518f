#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A private D-Bus session bus and, on demand, a gnome-keyring-daemon (secrets component only) on it, all under
/// one temporary directory. Nothing here touches the user's own session bus or keyring: the bus has its own
/// config (no service directories, so nothing is started by D-Bus activation), and every child gets an explicit
/// environment whose `DBUS_SESSION_BUS_ADDRESS` is this bus.
///
/// Flow: 1. `dbus-daemon --config-file=… --print-address --nofork`, address read from its output.
/// 2. `startKeyring()`: `gnome-keyring-daemon --foreground --components=secrets --unlock` with a throw-away password
///    on stdin. (An empty password does not work headless: gnome-keyring 42 then creates no "login" collection and
///    wants a GUI prompter to make one, so every store fails.) 3. `stop()`: SIGTERM to each child's PID.
final class PrivateSession: Sendable {
    static let dbusDaemon = "/usr/bin/dbus-daemon"
    static let keyringDaemon = "/usr/bin/gnome-keyring-daemon"
    static let secretToolPath = "/usr/bin/secret-tool"
    static var toolsInstalled: Bool {
        [dbusDaemon, keyringDaemon, secretToolPath].allSatisfy { (path: String) in access(path, X_OK) == 0 }
    }

    let root: String
    let address: String
    let bus: Child
    nonisolated(unsafe) var keyring: Child?

    init() throws {
        root = NSTemporaryDirectory() + "speakbridge-keyring-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        for dir in [root, root + "/run", root + "/data"] {
            guard mkdir(dir, 0o700) == 0 else { throw ChildError("mkdir \(dir): \(errno)") }
        }
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(root)/run/bus</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """
        try config.write(toFile: root + "/bus.conf", atomically: true, encoding: .utf8)
        bus = try Child([Self.dbusDaemon, "--config-file=\(root)/bus.conf", "--print-address", "--nofork"],
                        environment: ["PATH": "/usr/bin:/bin", "HOME": root])
        let deadline = ContinuousClock.now + .seconds(5)
        var address = ""
        while ContinuousClock.now < deadline {
            if let line = bus.output.split(separator: "\n").first(where: { $0.hasPrefix("unix:") }) {
                address = String(line)
                break
            }
            guard bus.isRunning else { break }
            usleep(20_000)
        }
        guard !address.isEmpty else {
            let out = bus.output
            bus.stop()
            throw ChildError("dbus-daemon gave no address: \(out)")
        }
        self.address = address
    }

    /// The environment every child (and libsecret in this process) sees.
    var environment: [String: String] {
        ["PATH": "/usr/bin:/bin", "HOME": root, "XDG_RUNTIME_DIR": root + "/run", "XDG_DATA_HOME": root + "/data",
         "DBUS_SESSION_BUS_ADDRESS": address]
    }

    func startKeyring() throws {
        keyring = try Child([Self.keyringDaemon, "--foreground", "--components=secrets", "--unlock"],
                            environment: environment, stdin: "speakbridge-test-only")
    }

    /// `secret-tool ARGS…` against this bus.
    func secretTool(_ args: [String]) throws -> (status: Int32, output: String) {
        try run([Self.secretToolPath] + args, environment: environment)
    }

    func stop() {
        keyring?.stop()
        bus.stop()
        _ = try? FileManager.default.removeItem(atPath: root)
    }
}
