#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

/// The type sink of a real daemon under a real X server: `send` → daemon → XTEST → a real xterm whose keyboard
/// input is recorded byte for byte (`stty -icanon -echo; cat > FILE` inside it).
@Suite("End to end: typing into an xterm", .serialized,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/Xvfb")
                && FileManager.default.isExecutableFile(atPath: "/usr/bin/xterm")
                && FileManager.default.isExecutableFile(atPath: "/usr/bin/xdotool"),
                "Xvfb, xterm or xdotool is not installed (make test installs them)"))
struct TypeTests {
    @Test("send → serve --sink type: umlauts, capitals, emoji, CJK and RTL arrive char for char, no Enter")
    func typeSink() throws {
        let xvfb = try XServer()
        defer { xvfb.stop() }
        let dir = Harness.tempDir("xterm")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (xterm, id) = try RecordingXterm.start("typed", dir: dir, display: xvfb.display)
        defer { kill(xterm.processIdentifier, SIGKILL); xterm.waitUntilExit() }
        try RecordingXterm.focus(id, display: xvfb.display)

        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["type"], env: ["DISPLAY": xvfb.display, "WAYLAND_DISPLAY": ""])
        let status = try run(["status"], home: pair.desktopHome).stdout
        #expect(status.contains("type"))
        try pair.join()
        let chunks = ["ASCII ok; umlauts: Grüße Äpfel Öl ß;", "emoji: 👋🎉; CJK: 你好世界 日本語",
                      "שלום مرحبا\nnext line"]
        #expect(try pair.send(chunks).status == 0)
        let expected = "ASCII ok; umlauts: Grüße Äpfel Öl ß; emoji: 👋🎉; CJK: 你好世界 日本語 שלום مرحبا next line"
        var got = ""
        let deadline = Date().addingTimeInterval(10)
        while got != expected, Date() < deadline {
            got = RecordingXterm.typed("typed", dir)
            usleep(20_000)
        }
        #expect(got == expected)
    }
}
