#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
@testable import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// The desktop shell around its core, against the real daemon: what a client and a script see.
@Suite("End to end: desktop shell", .serialized)
struct DesktopShellTests {
    @Test("a client's malformed error closes its session (no malformed reply), counted once as closed on an error")
    func malformedClientErrorCloses() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        let peer = try RawPeer.paired(with: pair, name: "raw")
        var (link, machine) = try peer.session(port: pair.port, sending: [.resume(session: "s", delivered: nil)])
        defer { link.close() }
        _ = try link.next()  // the resume answer
        guard case .established = machine.state,
              let frame = try machine.session?.encrypt(Array(#"{"type":"error","code":7}"#.utf8)) else {
            Issue.record("not established")
            return
        }
        link.send(frame)
        try link.waitClosed()
        try Harness.wait("the daemon to log the error") {
            TerminalBytes.read(pair.daemon!.stderrPath).contains("reported error malformed")
        }
        let after = try pair.status()
        #expect(after["closedOnError"]?.int64Value == 1, "\(after)")
        #expect(after["rejected"]?.int64Value == 0, "\(after)")
    }

    @Test("status --json: mdns.name is the published name, null without mDNS; the counters are all there")
    func statusKeys() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        let s = try pair.status()
        #expect(s["mdns"]?["name"] == .null, "\(s)")
        #expect(s["mdns"]?["enabled"]?.boolValue == false)
        for key in ["id", "name", "pid", "host", "port", "addresses", "uptime", "pairing", "sinks", "devices",
                    "connections", "authenticated", "connected", "sessions", "chunksDelivered", "duplicatesDropped",
                    "closedNormally", "closedOnError", "rejected", "pairingFailures", "mdns"] {
            #expect(s[key] != nil, "status --json lost \(key)")
        }
    }
}
