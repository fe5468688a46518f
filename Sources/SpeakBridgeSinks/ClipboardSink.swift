internal import Glibc

/// The program that writes the clipboard.
public enum ClipboardBackend: String, Sendable, CaseIterable {
    /// Wayland, from the Debian package wl-clipboard.
    case wlCopy = "wl-copy"
    /// X11, from the Debian package xclip.
    case xclip
    /// X11, from the Debian package xsel.
    case xsel

    /// The executable's name.
    public var executable: String { rawValue }

    /// The Debian package that ships it.
    public var debianPackage: String {
        switch self {
        case .wlCopy: "wl-clipboard"
        case .xclip: "xclip"
        case .xsel: "xsel"
        }
    }

    /// Arguments that make the tool read the new selection content from stdin.
    public func arguments(primary: Bool) -> [String] {
        switch self {
        case .wlCopy: primary ? ["--primary"] : []
        case .xclip: ["-selection", primary ? "primary" : "clipboard", "-i"]
        case .xsel: [primary ? "--primary" : "--clipboard", "--input"]
        }
    }

    /// Picks the tool for the session described by `environment`: with WAYLAND_DISPLAY, wl-copy; with DISPLAY,
    /// xclip, then xsel. Throws with a hint naming the package to install, or the missing variable.
    public static func choose(environment: [String: String]) throws(SinkError) -> ClipboardBackend {
        let wayland = !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty
        let x11 = !(environment["DISPLAY"] ?? "").isEmpty
        if wayland, ToolRunner.find(ClipboardBackend.wlCopy.executable, environment: environment) != nil {
            return .wlCopy
        }
        if x11 {
            for backend in [ClipboardBackend.xclip, .xsel]
            where ToolRunner.find(backend.executable, environment: environment) != nil {
                return backend
            }
        }
        switch (wayland, x11) {
        case (false, false):
            throw SinkError(message: "no graphical session for the clipboard sink: DISPLAY and WAYLAND_DISPLAY are unset",
                            hint: "run the daemon inside your desktop session, or export DISPLAY (X11) or WAYLAND_DISPLAY (Wayland)")
        case (true, false):
            throw SinkError(message: "no clipboard tool for Wayland: wl-copy not found in PATH",
                            hint: "install the Debian package wl-clipboard")
        case (false, true):
            throw SinkError(message: "no clipboard tool for X11: neither xclip nor xsel found in PATH",
                            hint: "install the Debian package xclip (or xsel)")
        case (true, true):
            throw SinkError(message: "no clipboard tool: none of wl-copy, xclip, xsel found in PATH",
                            hint: "install the Debian package wl-clipboard (Wayland) or xclip (X11)")
        }
    }
}

/// Puts the latest dictation on the clipboard (CLIPBOARD or PRIMARY selection).
///
/// Each `deliver` replaces the selection with that batch's texts joined by "\n" (one tool invocation; the daemon
/// hears `willComplete(texts.count)` right before it). The tool forks a child that owns the selection until
/// another program takes it; only the tool's own process is waited for, with a timeout (see `ToolRunner`).
/// The text is sanitized unless raw (pasting into a terminal must not smuggle escape sequences) and is never
/// logged or put into an error message.
public final class ClipboardSink: DescribedSink {
    public let backend: ClipboardBackend
    public let primary: Bool
    public let label: String
    private let executablePath: String
    private let sanitize: Bool
    private let environment: [String: String]
    private let timeout: Duration

    /// - Parameters:
    ///   - environment: passed to the tool (DISPLAY, WAYLAND_DISPLAY, XAUTHORITY, XDG_RUNTIME_DIR…); its PATH
    ///     is searched for the tool.
    ///   - timeout: longest wait for the tool's own process.
    /// Throws when the tool is not in PATH, with a hint naming its Debian package.
    public init(backend: ClipboardBackend, primary: Bool, sanitize: Bool = true, environment: [String: String],
                timeout: Duration = .seconds(5)) throws(SinkError) {
        guard let path = ToolRunner.find(backend.executable, environment: environment) else {
            throw SinkError(message: "\(backend.executable) not found in PATH",
                            hint: "install the Debian package \(backend.debianPackage)")
        }
        self.backend = backend
        self.primary = primary
        self.label = primary ? "clipboard:primary" : "clipboard"
        self.executablePath = path
        self.sanitize = sanitize
        self.environment = environment
        self.timeout = timeout
    }

    /// E.g. `xclip on X11 :0 (CLIPBOARD)`.
    public var method: String {
        let selection = primary ? "PRIMARY" : "CLIPBOARD"
        switch backend {
        case .wlCopy: return "wl-copy on Wayland \(environment["WAYLAND_DISPLAY"] ?? "") (\(selection))"
        case .xclip, .xsel: return "\(backend.executable) on X11 \(environment["DISPLAY"] ?? "") (\(selection))"
        }
    }

    /// Checks that the display the tool will talk to is reachable: "cannot open display :57" at start, instead
    /// of a sink that starts "ok" and fails at the first chunk.
    public func probe() throws(SinkError) {
        switch backend {
        case .wlCopy: try DisplayProbe.checkWayland(environment)
        case .xclip, .xsel: try DisplayProbe.checkX11(environment["DISPLAY"] ?? "")
        }
    }

    public var health: String? { nil }

    public func waitUntilReady(timeout: Duration) -> String? { nil }

    public func deliver(_ texts: [String], willComplete: (Int) throws -> Void) throws(SinkError) {
        guard !texts.isEmpty else { return }
        // The X server or compositor the probe accepted at start may have gone since, and another user's taken its
        // name: who serves the display is asked again before each run (a connect(2) and getsockopt(2); a tool run
        // costs milliseconds). wl-copy gets the very connection judged (`DisplayProbe.connectWayland`).
        if backend != .wlCopy, let problem = DisplayProbe.currentServerProblem(environment["DISPLAY"] ?? "") {
            throw problem
        }
        let compositor = backend == .wlCopy ? try DisplayProbe.connectWayland(environment) : nil
        defer { if let compositor { Glibc.close(compositor) } }
        let joined = texts.map { sanitize ? OutputSanitizer.sanitize($0) : $0 }.joined(separator: "\n")
        do { try willComplete(texts.count) } catch {
            throw SinkError(message: "could not record progress: \(error)")
        }
        do {
            try ToolRunner.run(executablePath, backend.arguments(primary: primary), input: Array(joined.utf8),
                               environment: environment, timeout: timeout, waylandSocket: compositor)
        } catch {
            throw SinkError(message: error.message(tool: backend.executable, hiding: texts + [joined]),
                            hint: failureHint)
        }
    }

    private var failureHint: String {
        switch backend {
        case .wlCopy:
            "check that the Wayland compositor at WAYLAND_DISPLAY=\(environment["WAYLAND_DISPLAY"] ?? "") is reachable"
        case .xclip, .xsel:
            "check that the X server at DISPLAY=\(environment["DISPLAY"] ?? "") is reachable (and XAUTHORITY is right)"
        }
    }

    public func close() {}
}
