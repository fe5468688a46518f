#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeTestSupport
import Testing

/// The clipboard sink under a real X server: the daemon's xclip-backed sink, read back with `xclip -o`.
@Suite("End to end: clipboard", .serialized,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/Xvfb")
                && FileManager.default.isExecutableFile(atPath: "/usr/bin/xclip"),
                "Xvfb or xclip is not installed (make test installs them)"))
struct ClipboardTests {
    @Test("chunks land in CLIPBOARD and PRIMARY, read back with xclip -o")
    func clipboardSink() throws {
        let xvfb = try XServer()
        defer { xvfb.stop() }
        let pair = Pair()
        defer { pair.stop() }
        let env = ["DISPLAY": xvfb.display, "WAYLAND_DISPLAY": ""]
        try pair.startDaemon(sinks: ["clipboard", "clipboard:primary"], env: env)
        try pair.join()
        #expect(try pair.send(["dictated into the clipboard — ü"]).status == 0)
        #expect(xvfb.read("clipboard") == "dictated into the clipboard — ü")
        #expect(xvfb.read("primary") == "dictated into the clipboard — ü")
        #expect(try pair.send(["second phrase"]).status == 0)
        #expect(xvfb.read("clipboard") == "second phrase")
    }

    @Test("no X display: the daemon refuses to start with a clear error and hint")
    func noDisplay() throws {
        let home = Harness.tempDir("noclip")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let p = try Proc(["serve", "--listen", "127.0.0.1:0", "--no-mdns", "--sink", "clipboard"], home: home,
                         env: ["DISPLAY": "", "WAYLAND_DISPLAY": ""], label: "serve")
        let out = try p.wait(timeout: 20)
        #expect(out.status != 0)
        #expect(out.stderr.contains("speakbridge: error:"))
        #expect(out.stderr.contains("speakbridge: hint:"))
    }
}

/// The start-up probe: a sink that cannot work stops `serve` with an error naming the display, before any chunk.
@Suite("End to end: sink probes at start", .serialized)
struct SinkProbeTests {
    @Test("serve --sink clipboard with a dead DISPLAY: cannot open display", arguments: ["clipboard", "type"])
    func deadDisplayStopsServe(_ sink: String) throws {
        let home = Harness.tempDir("deadclip")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let number = ChosenDisplay.unused()
        let p = try Proc(["serve", "--listen", "127.0.0.1:0", "--no-mdns", "--sink", sink], home: home,
                         env: ["DISPLAY": ":\(number)", "WAYLAND_DISPLAY": ""], label: "serve")
        let out = try p.wait(timeout: 20)
        #expect(out.status != 0)
        #expect(out.stderr.contains("speakbridge: error: cannot open display :\(number)"), "\(out.stderr)")
        #expect(out.stderr.contains("speakbridge: hint:"))
    }
}

/// A private Xvfb on a display number it chose itself; stopped by PID.
final class XServer {
    let process = Process()
    let display: String
    /// The display number this server was told to take (`init(number:)`); nil when Xvfb chose it.
    private var number: Int?

    /// `Xvfb -displayfd` picks a free display number itself and announces it: no guessing, so suites that start
    /// servers at the same time (they run in parallel) never race for one number.
    init() throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/Xvfb")
        process.arguments = ["-displayfd", "1", "-nolisten", "tcp", "-noreset", "-screen", "0", "640x480x24"]
        let announced = Pipe()
        process.standardOutput = announced
        process.standardError = FileHandle.nullDevice
        try process.run()
        let fd = announced.fileHandleForReading.fileDescriptor
        var bytes: [UInt8] = []
        let deadline = Date().addingTimeInterval(20)
        while !bytes.contains(0x0A), Date() < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 100) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 16)
            let n = Glibc.read(fd, &chunk, chunk.count)
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        let number = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !number.isEmpty, number.allSatisfy(\.isNumber) else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw HarnessError("Xvfb did not announce a display (got \(number.debugDescription))")
        }
        display = ":\(number)"
    }

    /// An Xvfb on display `:number`, for a test that stops it while a tool still points there: `-displayfd`
    /// servers take the lowest free numbers, so one stopped at a low number is soon replaced by another suite's, and a
    /// tool pointed at it then reaches a live display. A number far above those stays dead once stopped.
    init(number: Int) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/Xvfb")
        process.arguments = [":\(number)", "-nolisten", "tcp", "-noreset", "-screen", "0", "640x480x24"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        display = ":\(number)"
        do {
            try Harness.wait("Xvfb to listen on \(display)") { !process.isRunning || ChosenDisplay.hasSocket(number) }
        } catch {
            stop()
            throw error
        }
        guard process.isRunning else { throw HarnessError("Xvfb could not start on \(display) (taken?)") }
        self.number = number  // listening: its socket and lock file are this server's to remove at `stop`
    }

    func read(_ selection: String) -> String? {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/xclip")
        p.arguments = ["-o", "-selection", selection]
        var env = ProcessInfo.processInfo.environment
        env["DISPLAY"] = display
        p.environment = env
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return nil }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        // Killed, Xvfb leaves its socket and lock file behind; `-displayfd` servers reuse theirs, but a number
        // chosen by `init(number:)` would be skipped by every later run that finds its socket.
        if let number { ChosenDisplay.removeLeftovers(number) }
    }
}
