#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// Issue 8 row 4: text a peer chose reaches the daemon's log and `speakbridge devices` escaped, never raw.
@Suite("End to end: peer text in logs and terminals", .serialized)
struct PeerTextEndToEndTests {
    /// OSC 52 (set the clipboard), CSI (clear screen), 8-bit CSI, RLO, and a newline that starts a forged line.
    static let hostileName = "\u{1B}]52;c;SGk=\u{07}\u{1B}[2J\u{9B}31m\u{202E}\nspeakbridge: paired with \"X\""
    static let hostileType = "config-\u{1B}[2J\nspeakbridge: ok"
    static let hostileCode = "\u{1B}P1$r\u{1B}\\\n"
    static let hostileMessage = "\u{1B}]52;c;SGk=\u{07}\u{2066}\nspeakbridge: paired with \"X\""

    @Test("a device named with OSC 52, CSI, U+202E and a newline, its error and config-* texts: escaped in the log and in devices")
    func hostileTextIsEscaped() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        let peer = try RawPeer.paired(with: pair, name: Self.hostileName)
        let (link, _) = try peer.session(port: pair.port, sending: [
            .config(type: Self.hostileType, body: .object([("batch", .string("b-1"))])),
            .error(code: ProtocolErrorCode(rawValue: Self.hostileCode), message: Self.hostileMessage, expected: nil),
        ])
        defer { link.close() }
        try link.waitClosed()  // the daemon closes after the peer's error
        let log = TerminalBytes.read(pair.daemon!.stderrPath)
        try Harness.wait("the daemon to log the peer's error") { TerminalBytes.read(pair.daemon!.stderrPath).contains("reported error") }

        let devices = try run(["devices"], home: pair.desktopHome)
        let json = try run(["devices", "--json"], home: pair.desktopHome)
        let status = try run(["status"], home: pair.desktopHome)
        let fullLog = TerminalBytes.read(pair.daemon!.stderrPath)
        for (what, text) in [("log", fullLog), ("devices", devices.stdout), ("devices --json", json.stdout),
                             ("status", status.stdout), ("devices stderr", devices.stderr)] {
            #expect(TerminalBytes.rawControls(text).isEmpty,
                    "\(what) carries raw controls \(TerminalBytes.rawControls(text).map { String($0.value, radix: 16) })")
            // The newline in the name must not start a line of its own.
            for line in text.split(separator: "\n") {
                #expect(!line.hasPrefix("speakbridge: paired with \"X\""), "forged line in \(what): \(line)")
                #expect(!line.hasPrefix("speakbridge: ok"), "forged line in \(what): \(line)")
            }
        }
        // Escaped visibly, not dropped: the reader sees what the peer tried.
        #expect(fullLog.contains(#"\x1b]52;c;SGk=\x07\x1b[2J\u{9B}31m\u{202E}\nspeakbridge: paired with "X""#), "\(log)")
        #expect(fullLog.contains(#"config-\x1b[2J\nspeakbridge: ok"#))
        #expect(fullLog.contains(#"\x1bP1$r\x1b\\n"#))
        #expect(devices.stdout.contains(#"\x1b]52;c;SGk=\x07"#))
        // JSON output stays JSON: the name parses back to exactly what the peer sent.
        let parsed = try JSONValue.parse(Array(json.stdout.utf8), maxDepth: 8, maxBytes: 1 << 20)
        #expect(parsed.arrayValue?.first?["name"]?.stringValue == Self.hostileName)
        // And the daemon still serves a legitimate client.
        try pair.join(name: "genuine")
        #expect(try pair.send(["still fine"]).status == 0)
    }
}
