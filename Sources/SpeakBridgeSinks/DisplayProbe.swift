internal import Glibc
internal import SpeakBridgeSupport

/// Start-up checks that a graphical session named by the environment can be reached, for the sinks' `probe()`.
enum DisplayProbe {
    /// Nil when the X server at the other end of `fd` runs as this user or root; else why it must not be used.
    /// Everything typed or copied goes to that server, and its socket can be another user's: the abstract
    /// `@/tmp/.X11-unix/X0` has no permissions, so anyone may bind it while no X server serves `:0` (a `DISPLAY=:0`
    /// set for a service in a Wayland session, say). The peer's credentials (SO_PEERCRED) tell. A TCP display
    /// (`host:0`, SSH forwarding) has none to read and is not judged here. (The Wayland compositor's socket is
    /// judged by `connectWayland`.)
    static func serverProblem(_ fd: Int32, display: String) -> SinkError? {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0, Int32(address.ss_family) == AF_UNIX else { return nil }
        guard let peer = PeerCredentials.of(fd) else {
            return SinkError(message: "cannot tell who runs the X server at \(display): \(POSIX.describe(errno))",
                             hint: "point DISPLAY at your own session's display")
        }
        guard peer.uid == 0 || peer.uid == geteuid() else {
            return SinkError(message: "the X server at \(display) runs as uid \(peer.uid), not this user or root: "
                                 + "what is typed or copied would go to that user",
                             hint: "point DISPLAY at your own session's display (a `DISPLAY=:0` set by hand may name one nobody of yours serves)")
        }
        return nil
    }

    /// `serverProblem` for the X server a tool run on `display` would reach now, by the socket libxcb tries first
    /// (the abstract `@/tmp/.X11-unix/XN`, then that path), without speaking X (no handshake, so a server that
    /// resets when its last client leaves is not made to). For a sink that hands text to a tool each time (the
    /// clipboard): the server its probe accepted at start may have gone, and another user's taken the name. Nil
    /// too when nothing answers (the tool then fails in its own words) or the display is not a local one.
    static func currentServerProblem(_ display: String) -> SinkError? {
        guard let number = localDisplayNumber(display) else { return nil }
        let path = "/tmp/.X11-unix/X\(number)"
        for abstract in [true, false] {
            guard let fd = UnixAddress(path, abstract: abstract)?.connectedStream() else { continue }
            defer { close(fd) }
            return serverProblem(fd, display: display)
        }
        return nil
    }

    /// N of a local X display `:N`, `:N.S` or `unix:N` (nil for `host:N`, which is TCP, or anything else).
    static func localDisplayNumber(_ display: String) -> Int? {
        guard let colon = display.lastIndex(of: ":") else { return nil }
        let host = display[..<colon]
        guard host.isEmpty || host == "unix" else { return nil }
        let rest = display[display.index(after: colon)...]
        let digits = rest.prefix { $0 != "." }
        guard !digits.isEmpty, digits.count <= 6, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(digits)
    }

    /// Throws unless the X server `display` accepts a connection (libX11's XOpenDisplay: it also applies
    /// XAUTHORITY). When libX11 itself cannot be loaded nothing is checked here: the clipboard tools need it and
    /// then fail with their own words.
    static func checkX11(_ display: String) throws(SinkError) {
        guard let opener = XDisplayOpener.shared else { return }
        // A second try after a moment: a server with no clients left resets (Xvfb without -noreset) and refuses
        // connections meanwhile, which is no reason to refuse to start.
        var opened = opener.open(display)
        if case .cannotOpen = opened {
            POSIX.sleep(.milliseconds(200))
            opened = opener.open(display)
        }
        switch opened {
        case .ok: return
        case .cannotOpen:
            throw SinkError(message: "cannot open display \(display)",
                            hint: "check that an X server runs at DISPLAY=\(display) and that XAUTHORITY lets this user in")
        case .refused(let problem): throw problem
        }
    }

    /// The path of the Wayland socket that `environment` names: $WAYLAND_DISPLAY, relative to $XDG_RUNTIME_DIR
    /// unless absolute.
    static func waylandSocketPath(_ environment: [String: String]) throws(SinkError) -> String {
        let name = environment["WAYLAND_DISPLAY"] ?? ""
        if name.hasPrefix("/") { return name }
        guard let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty else {
            throw SinkError(message: "cannot reach Wayland display \(PeerText.escape(name)): XDG_RUNTIME_DIR is unset",
                            hint: "run the daemon inside your desktop session, or export XDG_RUNTIME_DIR")
        }
        return runtime + "/" + name
    }

    /// A connection (close-on-exec; the caller closes it) to the Wayland compositor that `environment` names,
    /// made only when the compositor runs as this user or root. Everything typed or copied on Wayland goes to it,
    /// and its socket is a name in a directory: another user who can create that name (WAYLAND_DISPLAY pointing
    /// into a shared directory such as /tmp, a runtime directory that is not private) receives all dictation.
    /// Judged as the X server is (`serverProblem`): the process listening, asked of the kernel on this very
    /// connection (SO_PEERCRED); and the socket file (`SocketFile`, as for ydotool's): lstat
    /// must find a socket of this user or root, and a symbolic link must be theirs too, as must the socket it
    /// leads to. A tool given this connection (`ToolRunner.run(waylandSocket:)`, libwayland's WAYLAND_SOCKET)
    /// talks to the compositor judged here, not to whatever holds the name a moment later.
    static func connectWayland(_ environment: [String: String]) throws(SinkError) -> Int32 {
        let name = PeerText.escape(environment["WAYLAND_DISPLAY"] ?? "")
        let path = try waylandSocketPath(environment)
        let shown = PeerText.escape(path)
        guard let address = UnixAddress(path) else {
            throw SinkError(message: "Wayland socket path is too long: \(shown)")
        }
        // With patience: the sink thread must not hang in connect(2) on a compositor that does not accept.
        guard let fd = address.connectedStream(patience: .seconds(5)) else {
            let reason = POSIX.describe(errno)
            throw SinkError(message: "cannot connect to Wayland display \(name) (\(shown): \(reason))",
                            hint: "check that the compositor runs and WAYLAND_DISPLAY/XDG_RUNTIME_DIR name its socket")
        }
        if let problem = waylandProblem(fd, name: name, path: path) {
            close(fd)
            throw problem
        }
        return fd
    }

    /// Nil when the compositor at the other end of `fd` (connected to `path`) and the socket file at `path` are
    /// this user's or root's; else why neither may be used (see `connectWayland`).
    static func waylandProblem(_ fd: Int32, name: String, path: String) -> SinkError? {
        let shown = PeerText.escape(path)
        let hint = "point WAYLAND_DISPLAY at your own session's compositor, and keep its socket in your private "
            + "runtime directory (XDG_RUNTIME_DIR, mode 0700)"
        guard let peer = PeerCredentials.of(fd) else {
            return SinkError(message: "cannot tell who runs the Wayland compositor at \(name): \(POSIX.describe(errno))",
                             hint: hint)
        }
        guard !SocketFile.isForeign(peer.uid) else {
            return SinkError(message: "the Wayland compositor at \(name) runs as uid \(peer.uid), not this user or root: "
                                 + "what is typed or copied would go to that user", hint: hint)
        }
        switch SocketFile.judge(path) {
        case .ours:
            break
        case .unreadable(let code):
            return SinkError(message: "cannot check the Wayland socket \(shown): \(POSIX.describe(code))", hint: hint)
        case .foreignLink(let uid):
            return SinkError(message: "the Wayland socket \(shown) is a symbolic link of uid \(uid), not this user or "
                                 + "root: that user can point it at a compositor of theirs at any moment", hint: hint)
        case .notASocket:
            return SinkError(message: "\(shown), named by WAYLAND_DISPLAY, is not a socket", hint: hint)
        case .foreignSocket(let uid):
            return SinkError(message: "the Wayland socket \(shown) belongs to uid \(uid), not this user or root: "
                                 + "another user made it", hint: hint)
        }
        return nil
    }

    /// Throws unless the Wayland compositor that `environment` names accepts a connection and runs as this user or
    /// root (`connectWayland`; the connection is closed at once).
    static func checkWayland(_ environment: [String: String]) throws(SinkError) {
        close(try connectWayland(environment))
    }
}

/// libX11's XOpenDisplay/XCloseDisplay alone (the clipboard probe must not need libXtst, which `XLib` loads too).
final class XDisplayOpener: Sendable {
    private typealias Open = @convention(c) (UnsafePointer<CChar>?) -> OpaquePointer?
    private typealias Close = @convention(c) (OpaquePointer?) -> Int32
    private typealias ConnectionNumber = @convention(c) (OpaquePointer?) -> Int32
    private let openDisplay: Open
    private let close: Close
    private let connectionNumber: ConnectionNumber

    enum Opened {
        case ok
        case cannotOpen
        /// The server answered but must not be used (`DisplayProbe.serverProblem`).
        case refused(SinkError)
    }

    /// Nil when libX11 cannot be loaded. Why unsafe: dlsym's symbols are cast to the Xlib.h prototypes.
    static let shared: XDisplayOpener? = {
        guard let handle = dlopen("libX11.so.6", RTLD_NOW | RTLD_LOCAL),
              let open = dlsym(handle, "XOpenDisplay"), let close = dlsym(handle, "XCloseDisplay"),
              let number = dlsym(handle, "XConnectionNumber") else { return nil }
        if let initThreads = dlsym(handle, "XInitThreads") {
            _ = unsafeBitCast(initThreads, to: (@convention(c) () -> Int32).self)()
        }
        return XDisplayOpener(open: unsafeBitCast(open, to: Open.self), close: unsafeBitCast(close, to: Close.self),
                              connectionNumber: unsafeBitCast(number, to: ConnectionNumber.self))
    }()

    private init(open: Open, close: Close, connectionNumber: ConnectionNumber) {
        self.openDisplay = open
        self.close = close
        self.connectionNumber = connectionNumber
    }

    /// Opens `display`, judges who serves it, closes it.
    /// Under `suppressingSIGPIPE`: Xlib writes to the server's socket, which a server going away closes.
    func open(_ display: String) -> Opened {
        POSIX.suppressingSIGPIPE { () -> Opened in
            guard let connection = display.withCString({ openDisplay($0) }) else { return .cannotOpen }
            defer { _ = close(connection) }
            if let problem = DisplayProbe.serverProblem(connectionNumber(connection), display: display) {
                return .refused(problem)
            }
            return .ok
        }
    }
}

/// What is at a socket's path that a tool reaches by name (the Wayland compositor's, ydotoold's): judged with
/// lstat, as OpenSSH judges its files. A symbolic link must be this user's or root's (its owner could point it
/// anywhere at any moment), and so must the socket it leads to: another user who could make the name receives
/// everything typed or copied.
enum SocketFile: Equatable {
    case ours
    /// lstat, or stat of a link's target, failed (errno).
    case unreadable(Int32)
    case foreignLink(uid_t)
    case notASocket
    case foreignSocket(uid_t)

    static func judge(_ path: String) -> SocketFile {
        var info = stat()
        guard lstat(path, &info) == 0 else { return .unreadable(errno) }
        if info.st_mode & S_IFMT == S_IFLNK {
            guard !isForeign(info.st_uid) else { return .foreignLink(info.st_uid) }
            guard stat(path, &info) == 0 else { return .unreadable(errno) }
        }
        guard info.st_mode & S_IFMT == S_IFSOCK else { return .notASocket }
        return isForeign(info.st_uid) ? .foreignSocket(info.st_uid) : .ours
    }

    /// Neither this process's (effective) user nor root.
    static func isForeign(_ uid: uid_t) -> Bool { uid != geteuid() && uid != 0 }
}
