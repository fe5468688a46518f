#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import Testing

/// A native `send` (and `join`) offers `speakbridge.v1.aesgcm` first where the CPU has AES-NI, and the desktop takes
/// it on its plain listener too, not only on the browser route's TLS port; a side without AES-GCM (here:
/// `SPEAKBRIDGE_NO_AESGCM`, the same code path as a CPU without AES-NI, which this machine cannot be) speaks
/// ChaChaPoly with the other. The two real binaries on loopback; the cipher read from the daemon's `--verbose` line
/// for each connection.
@Suite("Native clients and AESGCM", .serialized)
struct NativeCipherTests {
    static let withoutAESGCM = ["SPEAKBRIDGE_NO_AESGCM": "1"]

    /// Pairs and sends two lines; returns the daemon's "connection … opened" lines.
    func exchange(daemonFlags: [String] = [], daemonEnv: [String: String] = [:],
                  clientEnv: [String: String] = [:]) throws -> [String] {
        let pair = Pair()
        defer { pair.stop() }
        let daemon = try LoggingTests.serve(home: pair.desktopHome, ["--verbose"] + daemonFlags, journal: false,
                                            env: daemonEnv)
        defer { daemon.stop() }
        let reader = FifoReader(path: pair.desktopHome + "/out")
        reader.start()
        defer { reader.stop() }
        let code = try pair.pairCode()
        #expect(try run(["join", code, "--name", "phone"], home: pair.phoneHome, env: clientEnv).status == 0)
        let sent = try run(["send", "--text", "one cipher", "--text", "or the other"], home: pair.phoneHome,
                           env: clientEnv, timeout: 60)
        #expect(sent.status == 0)
        try Harness.wait("both lines on the FIFO") { reader.count >= 2 }
        #expect(reader.snapshot == ["one cipher", "or the other"])
        daemon.stop()
        return daemon.lines.filter { $0.contains("debug: connection ") && $0.contains(" opened from ") }
    }

    static func expectAll(_ opened: [String], _ cipher: String) {
        #expect(opened.contains { $0.contains(" for /speakbridge.v1/pair (\(cipher))") }, "\(opened)")
        #expect(opened.contains { $0.contains(" for /speakbridge.v1/session (\(cipher))") }, "\(opened)")
        #expect(opened.allSatisfy { $0.hasSuffix("(\(cipher))") }, "\(opened)")
    }

    @Test("join and send negotiate AESGCM with a desktop that has AES-NI, with and without the browser route",
          .enabled(if: NoiseCipher.aesGCM.isAvailable, "this CPU has no AES-NI"),
          arguments: [[], ["--no-web"]])
    func aesGCMWhenBothCan(flags: [String]) throws {
        Self.expectAll(try exchange(daemonFlags: flags), "AESGCM")
    }

    @Test("a desktop without AES-GCM answers `speakbridge.v1` to the offer of both: the client speaks ChaChaPoly")
    func desktopWithoutAESGCM() throws {
        Self.expectAll(try exchange(daemonEnv: Self.withoutAESGCM), "ChaChaPoly")
    }

    @Test("a client without AES-GCM offers `speakbridge.v1` alone: ChaChaPoly with a desktop that has it")
    func clientWithoutAESGCM() throws {
        Self.expectAll(try exchange(clientEnv: Self.withoutAESGCM), "ChaChaPoly")
    }
}
