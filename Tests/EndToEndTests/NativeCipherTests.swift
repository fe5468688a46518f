#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import Testing

/// A native `send` (and `join`) offers `speakbridge.v1.aesgcm` first where the CPU has AES-NI, and the desktop takes
/// it on its plain listener too, not only on the browser route's TLS port: the two real binaries on loopback, the
/// cipher read from the daemon's `--verbose` line for each connection.
@Suite("Native clients and AESGCM", .serialized)
struct NativeCipherTests {
    static func connections(_ daemon: LoggingTests.LoggedProc) -> [String] {
        daemon.lines.filter { $0.contains("debug: connection ") && $0.contains(" opened from ") }
    }

    @Test("join and send negotiate AESGCM with a desktop that has AES-NI, with and without the browser route",
          .enabled(if: NoiseCipher.aesGCM.isAvailable, "this CPU has no AES-NI"),
          arguments: [[], ["--no-web"]])
    func aesGCMWhenBothCan(flags: [String]) throws {
        let pair = Pair()
        defer { pair.stop() }
        let daemon = try LoggingTests.serve(home: pair.desktopHome, ["--verbose"] + flags, journal: false)
        defer { daemon.stop() }
        let reader = FifoReader(path: pair.desktopHome + "/out")
        reader.start()
        defer { reader.stop() }
        let code = try pair.pairCode()
        #expect(try run(["join", code, "--name", "phone"], home: pair.phoneHome).status == 0)
        #expect(try pair.send(["over AES-GCM", "and again"]).status == 0)
        try Harness.wait("both lines on the FIFO") { reader.count >= 2 }
        #expect(reader.snapshot == ["over AES-GCM", "and again"])
        daemon.stop()
        let opened = Self.connections(daemon)
        #expect(opened.contains { $0.contains(" for /speakbridge.v1/pair (AESGCM)") }, "\(opened)")
        #expect(opened.contains { $0.contains(" for /speakbridge.v1/session (AESGCM)") }, "\(opened)")
        #expect(!opened.contains { $0.contains("(ChaChaPoly)") }, "\(opened)")
    }
}
