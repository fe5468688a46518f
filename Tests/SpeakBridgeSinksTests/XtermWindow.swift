import Foundation
import Glibc

/// A real xterm on a test X server whose keyboard input is recorded byte for byte: its child puts the terminal in
/// non-canonical mode without echo and runs `cat > FILE`, so every character the xterm receives from the keyboard
/// lands in FILE at once, in order (Enter arrives as "\n" through the terminal's CR-to-NL input mapping).
/// The window is titled `title`; `focus()` gives it the keyboard focus (xdotool windowfocus --sync). Stopped by PID.
final class XtermWindow {
    static let executable = systemTool("xterm")

    let title: String
    let windowID: String
    private let process: Process
    private let directory: TemporaryDirectory
    private let display: String
    var recordPath: String { "\(directory.path)/typed" }

    init(display: String, title: String) throws {
        self.title = title
        self.display = display
        directory = TemporaryDirectory()
        let idPath = "\(directory.path)/windowid"
        let script = "printf %s \"$WINDOWID\" > \(idPath).tmp && mv \(idPath).tmp \(idPath); "
            + "stty -icanon -echo min 1 time 0; exec cat > \(directory.path)/typed"
        process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.executable.orThrow("xterm is not installed"))
        process.arguments = ["-u8", "-T", title, "-geometry", "60x10+0+0", "-e", "/bin/sh", "-c", script]
        process.environment = ["DISPLAY": display, "PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": directory.path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        var unmasked = sigset_t(), previous = sigset_t()  // see XvfbServer: spawn with no blocked signals
        sigemptyset(&unmasked)
        pthread_sigmask(SIG_SETMASK, &unmasked, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        try process.run()
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(20))
        var id = ""
        while clock.now < deadline {
            if let text = try? String(contentsOfFile: idPath, encoding: .utf8), !text.isEmpty,
               FileManager.default.fileExists(atPath: "\(directory.path)/typed") {
                id = text
                break
            }
            sleepFor(.milliseconds(20))
        }
        guard !id.isEmpty else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw TestFailure("xterm did not start")
        }
        windowID = id
    }

    /// Gives this xterm the keyboard focus and waits until the server has it there.
    func focus() throws {
        let tool = Process()
        tool.executableURL = URL(fileURLWithPath: try systemTool("xdotool").orThrow("xdotool is not installed"))
        tool.arguments = ["windowfocus", "--sync", windowID]
        tool.environment = ["DISPLAY": display, "PATH": "/usr/bin:/bin"]
        tool.standardOutput = FileHandle.nullDevice
        tool.standardError = FileHandle.nullDevice
        try tool.run()
        tool.waitUntilExit()
        guard tool.terminationStatus == 0 else { throw TestFailure("xdotool windowfocus failed") }
    }

    /// What the xterm received so far.
    func received() -> String {
        String(decoding: FileManager.default.contents(atPath: recordPath) ?? Data(), as: UTF8.self)
    }

    /// What the xterm received, waiting up to `patience` for it to equal `expected` (the X server has processed
    /// every key when `deliver` returns; xterm and cat take a moment more).
    func received(expecting expected: String, patience: Duration = .seconds(30)) -> String {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: patience)
        var last = received()
        while last != expected, clock.now < deadline {
            sleepFor(.milliseconds(20))
            last = received()
        }
        return last
    }

    func stop() {
        let pid = process.processIdentifier
        kill(pid, SIGTERM)
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(5))
        while process.isRunning, clock.now < deadline { sleepFor(.milliseconds(20)) }
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
        directory.remove()
    }
}
