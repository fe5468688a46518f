#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Where one installation keeps its files.
///
/// Default: XDG base directories (`$XDG_CONFIG_HOME/speakbridge`, `$XDG_STATE_HOME/speakbridge`,
/// `$XDG_RUNTIME_DIR/speakbridge`). `--home DIR` or `SPEAKBRIDGE_HOME=DIR` puts all three under DIR
/// (`DIR/config`, `DIR/state`, `DIR/run`), so several installations can run side by side.
public struct Home: Sendable, Equatable {
    public var config: String
    public var state: String
    public var runtime: String

    public init(config: String, state: String, runtime: String) {
        self.config = config
        self.state = state
        self.runtime = runtime
    }

    public static func resolve(override: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> Home {
        if let root = override ?? environment["SPEAKBRIDGE_HOME"], !root.isEmpty {
            let abs = root.hasPrefix("/") ? root : FileManager.default.currentDirectoryPath + "/" + root
            return Home(config: abs + "/config", state: abs + "/state", runtime: abs + "/run")
        }
        let home = environment["HOME"] ?? "/root"
        func xdg(_ key: String, _ fallback: String) -> String {
            if let v = environment[key], v.hasPrefix("/") { return v }
            return fallback
        }
        let runtimeBase = environment["XDG_RUNTIME_DIR"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/tmp/speakbridge-\(getuid())"
        return Home(config: xdg("XDG_CONFIG_HOME", home + "/.config") + "/speakbridge",
                    state: xdg("XDG_STATE_HOME", home + "/.local/state") + "/speakbridge",
                    runtime: runtimeBase + (environment["XDG_RUNTIME_DIR"] == nil ? "" : "/speakbridge"))
    }

    public var identityFile: String { config + "/identity.key" }
    public var settingsFile: String { config + "/settings.json" }
    public var peersFile: String { state + "/peers.json" }
    public var progressFile: String { state + "/progress.log" }
    public var outboxDirectory: String { state + "/outbox" }
    public var controlSocket: String { runtime + "/control.sock" }
    public var daemonLock: String { state + "/daemon.lock" }

    /// Holds an exclusive lock for as long as the returned descriptor stays open: one daemon per home.
    /// In the state directory (not the runtime one), so it also holds when two runtime dirs differ.
    public func lockDaemon() throws(StoreError) -> Int32 {
        try prepare()
        let fd = try FileIO.openAppend(daemonLock)
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw StoreError("another speakbridge daemon is already running for this home (\(state))",
                             hint: "stop it first (`speakbridge status` shows its pid), or use a different --home")
        }
        return fd
    }

    /// Creates the three directories with mode 0700.
    public func prepare() throws(StoreError) {
        for dir in [config, state, runtime, outboxDirectory] {
            try FileIO.makeDirectory(dir)
        }
    }
}
