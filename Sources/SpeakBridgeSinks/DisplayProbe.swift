internal import Glibc

/// Start-up checks that a graphical session named by the environment can be reached, for the sinks' `probe()`.
enum DisplayProbe {
    /// Throws unless the X server `display` accepts a connection (libX11's XOpenDisplay: it also applies
    /// XAUTHORITY). When libX11 itself cannot be loaded nothing is checked here: the clipboard tools need it and
    /// then fail with their own words.
    static func checkX11(_ display: String) throws(SinkError) {
        guard let opener = XDisplayOpener.shared else { return }
        // A second try after a moment: a server with no clients left resets (Xvfb without -noreset) and refuses
        // connections meanwhile, which is no reason to refuse to start.
        guard opener.canOpen(display) || { POSIX.sleep(.milliseconds(200)); return opener.canOpen(display) }() else {
            throw SinkError(message: "cannot open display \(display)",
                            hint: "check that an X server runs at DISPLAY=\(display) and that XAUTHORITY lets this user in")
        }
    }

    /// Throws unless something listens on the Wayland socket that `environment` names ($WAYLAND_DISPLAY, relative
    /// to $XDG_RUNTIME_DIR unless absolute).
    static func checkWayland(_ environment: [String: String]) throws(SinkError) {
        let name = environment["WAYLAND_DISPLAY"] ?? ""
        let path: String
        if name.hasPrefix("/") {
            path = name
        } else {
            guard let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty else {
                throw SinkError(message: "cannot reach Wayland display \(name): XDG_RUNTIME_DIR is unset",
                                hint: "run the daemon inside your desktop session, or export XDG_RUNTIME_DIR")
            }
            path = runtime + "/" + name
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw SinkError(message: "Wayland socket path is too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        // Why unsafe: connect(2) takes the generic sockaddr view of the sockaddr_un filled above.
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if result != 0 {
            let reason = POSIX.describe(errno)
            throw SinkError(message: "cannot connect to Wayland display \(name) (\(path): \(reason))",
                            hint: "check that the compositor runs and WAYLAND_DISPLAY/XDG_RUNTIME_DIR name its socket")
        }
    }
}

/// libX11's XOpenDisplay/XCloseDisplay alone (the clipboard probe must not need libXtst, which `XLib` loads too).
final class XDisplayOpener: Sendable {
    private typealias Open = @convention(c) (UnsafePointer<CChar>?) -> OpaquePointer?
    private typealias Close = @convention(c) (OpaquePointer?) -> Int32
    private let open: Open
    private let close: Close

    /// Nil when libX11 cannot be loaded. Why unsafe: dlsym's symbols are cast to the Xlib.h prototypes.
    static let shared: XDisplayOpener? = {
        guard let handle = dlopen("libX11.so.6", RTLD_NOW | RTLD_LOCAL),
              let open = dlsym(handle, "XOpenDisplay"), let close = dlsym(handle, "XCloseDisplay") else { return nil }
        if let initThreads = dlsym(handle, "XInitThreads") {
            _ = unsafeBitCast(initThreads, to: (@convention(c) () -> Int32).self)()
        }
        return XDisplayOpener(open: unsafeBitCast(open, to: Open.self), close: unsafeBitCast(close, to: Close.self))
    }()

    private init(open: Open, close: Close) {
        self.open = open
        self.close = close
    }

    func canOpen(_ display: String) -> Bool {
        guard let connection = display.withCString({ open($0) }) else { return false }
        _ = close(connection)
        return true
    }
}
