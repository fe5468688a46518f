internal import SpeakBridgeSupport

/// The program that types text into the focused window.
public enum TypeBackend: String, Sendable, CaseIterable {
    /// X11, from the Debian package xdotool.
    case xdotool
    /// Wayland (compositors with the virtual-keyboard protocol), from the Debian package wtype.
    case wtype
    /// Any session through /dev/uinput (needs the ydotoold service), from the Debian package ydotool.
    case ydotool

    public var executable: String { rawValue }

    public var debianPackage: String { rawValue }

    /// Arguments that type `text` literally. `--` ends the options, so text starting with "-" is typed too.
    public func arguments(typing text: String) -> [String] {
        switch self {
        case .xdotool: ["type", "--clearmodifiers", "--delay", "0", "--", text]
        case .wtype: ["--", text]
        case .ydotool: ["type", "--", text]
        }
    }

    /// With WAYLAND_DISPLAY: wtype, then ydotool (xdotool would only reach XWayland windows). With DISPLAY:
    /// xdotool. Throws with a hint naming the package to install or the missing variable.
    public static func choose(environment: [String: String]) throws(SinkError) -> TypeBackend {
        let wayland = !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty
        let x11 = !(environment["DISPLAY"] ?? "").isEmpty
        if wayland {
            for backend in [TypeBackend.wtype, .ydotool]
            where ToolRunner.find(backend.executable, environment: environment) != nil {
                return backend
            }
            throw SinkError(message: "no typing tool for Wayland: neither wtype nor ydotool found in PATH",
                            hint: "install the Debian package wtype (or ydotool, which also needs its ydotoold service)")
        }
        if x11 {
            if ToolRunner.find(TypeBackend.xdotool.executable, environment: environment) != nil { return .xdotool }
            throw SinkError(message: "no typing tool for X11: xdotool not found in PATH",
                            hint: "install the Debian package xdotool")
        }
        throw SinkError(message: "no graphical session for the type sink: DISPLAY and WAYLAND_DISPLAY are unset",
                        hint: "run the daemon inside your desktop session, or export DISPLAY (X11) or WAYLAND_DISPLAY (Wayland)")
    }
}

/// Types each text at the cursor of the focused window.
///
/// Rules:
/// - Texts are always sanitized (`OutputSanitizer`), whatever `--raw` says: typed control characters are key
///   presses (Escape, Backspace…) in whatever window has the focus.
/// - Without `pressEnter`, line breaks and tabs become spaces, and consecutive texts (also across `deliver`
///   calls) are separated by one space, typed before the next text: Enter and Tab are never pressed.
/// - With `pressEnter` (`type:enter`), line breaks inside a text and one after each text are typed as Enter.
/// - Empty texts type nothing.
/// - One tool invocation per text; `willComplete(k)` right before the invocation that types text k.
public final class TypeSink: Sink {
    public let backend: TypeBackend
    public let pressEnter: Bool
    public let label: String
    private let executablePath: String
    private let environment: [String: String]
    /// Whether this sink has typed something, so the next text needs a separating space.
    private let typedBefore = Locked(false)

    /// Throws when the tool is not in PATH, with a hint naming its Debian package.
    public init(backend: TypeBackend, pressEnter: Bool, environment: [String: String]) throws(SinkError) {
        guard let path = ToolRunner.find(backend.executable, environment: environment) else {
            throw SinkError(message: "\(backend.executable) not found in PATH",
                            hint: "install the Debian package \(backend.debianPackage)")
        }
        self.backend = backend
        self.pressEnter = pressEnter
        self.label = pressEnter ? "type:enter" : "type"
        self.executablePath = path
        self.environment = environment
    }

    /// What is typed for `text`: sanitized, line breaks as the rules above say, with a leading space when
    /// `continuing` (something was typed before) and Enter is not used as the separator. Empty when nothing is typed.
    public static func keystrokes(for text: String, pressEnter: Bool, continuing: Bool) -> String {
        let clean = OutputSanitizer.sanitize(text)
        if clean.isEmpty { return "" }
        if pressEnter {
            return clean.replacingTabs() + "\n"
        }
        let flat = String(String.UnicodeScalarView(clean.unicodeScalars.map { $0 == "\n" || $0 == "\t" ? " " : $0 }))
        return continuing ? " " + flat : flat
    }

    public var health: String? { nil }

    public func waitUntilReady(timeout: Duration) -> String? { nil }

    public func deliver(_ texts: [String], willComplete: (Int) throws -> Void) throws(SinkError) {
        var continuing = typedBefore.withLock { $0 }
        for (index, text) in texts.enumerated() {
            let keys = Self.keystrokes(for: text, pressEnter: pressEnter, continuing: continuing)
            do { try willComplete(index + 1) } catch {
                throw SinkError(delivered: index, message: "could not record progress: \(error)")
            }
            if keys.isEmpty { continue }
            // Typing runs at about a millisecond per character with --delay 0; allow generously more.
            let timeout = Duration.seconds(10) + .milliseconds(20) * keys.unicodeScalars.count
            do {
                try ToolRunner.run(executablePath, backend.arguments(typing: keys), input: nil,
                                   environment: environment, timeout: timeout)
            } catch {
                let message = error.message(tool: backend.executable, hiding: [text, keys])
                throw SinkError(delivered: index, message: message, hint: failureHint)
            }
            continuing = true
            typedBefore.withLock { $0 = true }
        }
    }

    private var failureHint: String {
        switch backend {
        case .xdotool: "check that the X server at DISPLAY=\(environment["DISPLAY"] ?? "") is reachable"
        case .wtype: "wtype needs a compositor with the virtual-keyboard protocol (not GNOME); try ydotool there"
        case .ydotool: "start the ydotoold service and make sure /dev/uinput is writable"
        }
    }

    public func close() {}
}

private extension String {
    func replacingTabs() -> String {
        String(String.UnicodeScalarView(unicodeScalars.map { $0 == "\t" ? " " : $0 }))
    }
}
