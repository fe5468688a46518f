#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A real xterm under a test X server whose keyboard input is recorded byte for byte in `DIR/NAME.typed`
/// (`stty -icanon -echo; cat > FILE` inside it), for the typing tests.
enum RecordingXterm {
    /// Starts it and waits until it records; returns the process and its window ID.
    static func start(_ name: String, dir: String, display: String) throws -> (Process, String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/xterm")
        p.arguments = ["-u8", "-T", name, "-e", "/bin/sh", "-c",
                       "printf %s \"$WINDOWID\" > \(dir)/\(name).tmp && mv \(dir)/\(name).tmp \(dir)/\(name).id; "
                       + "stty -icanon -echo min 1 time 0; exec cat > \(dir)/\(name).typed"]
        p.environment = ["DISPLAY": display, "PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": dir]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        try Harness.wait("the xterm \(name)") { FileManager.default.fileExists(atPath: "\(dir)/\(name).typed") }
        return (p, try String(contentsOfFile: "\(dir)/\(name).id", encoding: .utf8))
    }

    /// Gives `window` the keyboard focus (no window manager under Xvfb: windowfocus, not windowactivate).
    static func focus(_ window: String, display: String) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/xdotool")
        p.arguments = ["windowfocus", "--sync", window]
        p.environment = ["DISPLAY": display]
        try p.run()
        p.waitUntilExit()
    }

    /// What the xterm NAME has received so far.
    static func typed(_ name: String, _ dir: String) -> String {
        (try? String(contentsOfFile: "\(dir)/\(name).typed", encoding: .utf8)) ?? ""
    }
}
