import Foundation
import SpeakBridgeProtocol
import Testing

/// Issue 12: `join` with an expired code and with a used one say different, precise things.
@Suite struct CodeMessageTests {
    @Test("an expired code: when it expired, how long ago, and what to do")
    func expiredCode() throws {
        let phone = Harness.tempDir("expired")
        defer { try? FileManager.default.removeItem(atPath: phone) }
        let expiry = UInt32(Date().timeIntervalSince1970) - 100
        let code = try PairingCode(publicKey: [UInt8](repeating: 7, count: 32), secret: [UInt8](repeating: 9, count: 32),
                                   expiry: expiry, port: 9, addresses: [PairingAddress("127.0.0.1")!]).encoded()
        let out = try run(["join", code, "--name", "phone"], home: phone)
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        let clock = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(expiry)))
        #expect(out.status != 0)
        #expect(out.stderr.contains("speakbridge: error: this pairing code expired at \(clock) (10"), "\(out.stderr)")
        #expect(out.stderr.contains("s ago)"), "\(out.stderr)")
        #expect(out.stderr.contains("speakbridge: hint: run `speakbridge pair` on the desktop for a new code"))
        #expect(!out.stderr.contains("already used"))
    }

    @Test("a used code: the desktop did not accept it, and the possible reasons")
    func usedCode() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        let code = try pair.pairCode()
        let first = try run(["join", code, "--name", "first"], home: pair.phoneHome)
        #expect(first.status == 0, "\(first.stderr)")
        let other = Harness.tempDir("second")
        defer { try? FileManager.default.removeItem(atPath: other) }
        let second = try run(["join", code, "--name", "second"], home: other)
        #expect(second.status != 0)
        #expect(second.stderr.contains("speakbridge: error: the desktop did not accept this code: it was already "
                                       + "used, replaced by a newer `speakbridge pair`, revoked after failed attempts, "
                                       + "or it is a browser code from `speakbridge pair --web`"),
                "\(second.stderr)")
        #expect(!second.stderr.contains("expired"), "\(second.stderr)")
    }
}
