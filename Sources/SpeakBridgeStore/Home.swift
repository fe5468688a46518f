#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials

/// Where one installation keeps its files.
///
/// Default: XDG base directories (`$XDG_CONFIG_HOME/speakbridge`, `$XDG_STATE_HOME/speakbridge`, and a runtime
/// directory, see `runtimeDirectory`). `--home DIR` or `SPEAKBRIDGE_HOME=DIR` puts all three under DIR
/// (`DIR/config`, `DIR/state`, `DIR/run`), so several installations can run side by side.
///
/// Every directory here (and DIR itself) must pass `PrivatePath.checkDirectory`: `prepare` creates what is missing
/// with mode 0700 and refuses a directory another user owns or can write.
public struct Home: Sendable, Equatable {
    public var config: String
    public var state: String
    public var runtime: String
    /// The `--home` directory, when one was given: checked like the others.
    public var root: String?

    public init(config: String, state: String, runtime: String, root: String? = nil) {
        self.config = config
        self.state = state
        self.runtime = runtime
        self.root = root
    }

    /// - Parameter systemRuntime: the login manager's per-user directory, used when `XDG_RUNTIME_DIR` is unset.
    public static func resolve(override: String?, environment: [String: String] = ProcessInfo.processInfo.environment,
                               systemRuntime: String = "/run/user/\(getuid())") -> Home {
        resolve(override: override, variable: { environment[$0] }, systemRuntime: systemRuntime)
    }

    /// The same, with each variable read through `variable` (nil = unset): the CLI passes getenv, so that no
    /// `[String: String]` is made at start (its first use looks up `String: Hashable` among every conformance
    /// record of the binary, about 0.26 M instructions).
    public static func resolve(override: String?, variable: (String) -> String?,
                               systemRuntime: String = "/run/user/\(getuid())") -> Home {
        if let root = override ?? variable("SPEAKBRIDGE_HOME"), !root.isEmpty {
            let abs = root.hasPrefix("/") ? root : FileManager.default.currentDirectoryPath + "/" + root
            return Home(config: abs + "/config", state: abs + "/state", runtime: abs + "/run", root: abs)
        }
        let home = variable("HOME") ?? "/root"
        func xdg(_ key: String, _ fallback: String) -> String {
            if let v = variable(key), v.hasPrefix("/") { return v }
            return fallback
        }
        let state = xdg("XDG_STATE_HOME", home + "/.local/state") + "/speakbridge"
        return Home(config: xdg("XDG_CONFIG_HOME", home + "/.config") + "/speakbridge", state: state,
                    runtime: runtimeDirectory(runtimeBase: variable("XDG_RUNTIME_DIR"), systemRuntime: systemRuntime,
                                              state: state))
    }

    /// The runtime directory (control socket), never a predictable name in a shared directory such as /tmp:
    /// 1. `$XDG_RUNTIME_DIR/speakbridge` when `XDG_RUNTIME_DIR` is set (an absolute path);
    /// 2. else `/run/user/UID/speakbridge` if `/run/user/UID` is a real directory, ours, mode 0700;
    /// 3. else `$XDG_STATE_HOME/speakbridge/run`: inside the user's own home, where no other user can create it
    ///    first, and the same for every process of the user, so the CLI finds the daemon.
    static func runtimeDirectory(runtimeBase: String?, systemRuntime: String, state: String) -> String {
        if let base = runtimeBase, base.hasPrefix("/") { return base + "/speakbridge" }
        var info = stat()
        if lstat(systemRuntime, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == geteuid(),
           info.st_mode & 0o7777 == 0o700 {
            return systemRuntime + "/speakbridge"
        }
        return state + "/run"
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

    /// Creates the directories (mode 0700) and checks each, root first: ours, not writable by anyone else, and the
    /// directories above them root's or ours (`PrivatePath.checkAncestors`, each walked once for the whole home).
    public func prepare() throws(StoreError) {
        var checked: [String] = []
        for dir in (root.map { [$0] } ?? []) + [config, state, runtime, outboxDirectory] {
            try PrivatePath.prepareDirectory(dir, checkedAncestors: &checked)
        }
    }
}
