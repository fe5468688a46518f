import Foundation
@testable import SpeakBridgeWebSocket
import Testing

/// The upgrade's `Origin` rule (UpgradeOrigin, PROTOCOL.md "Transport"): a web page of another origin, or one
/// reached through a name an attacker could rebind, gets 403 before the upgrade and never becomes a connection the
/// application sees; native clients (no Origin) and same-origin pages over an IP literal get in. Raw requests on
/// loopback against the real lws server; the TLS port through curl.
@Suite("Upgrade Origin check")
struct OriginTests {
    @Test("an Origin of another site gets 403 and no session; the same socket's address is not held")
    func foreignOriginIsRefused() async throws {
        let echo = try EchoServer()
        defer { echo.shutdown() }
        let raw = try RawWebSocket(port: echo.port)
        let head = raw.upgrade(path: "/speakbridge.v1/pair", host: "127.0.0.1:\(echo.port)", origin: "http://evil.example")
        #expect(httpStatus(head) == 403, "\(head)")
        #expect(raw.readsEOF())
        // `null` (a sandboxed frame, a file:// page) is an Origin too.
        let sandboxed = try RawWebSocket(port: echo.port)
        #expect(httpStatus(sandboxed.upgrade(host: "127.0.0.1:\(echo.port)", origin: "null")) == 403)
        // The same origin but the other scheme (a page on the TLS port dialling the plain one is not same-origin).
        let otherScheme = try RawWebSocket(port: echo.port)
        #expect(httpStatus(otherScheme.upgrade(host: "127.0.0.1:\(echo.port)", origin: "https://127.0.0.1:\(echo.port)")) == 403)
        // A native client afterwards opens as usual, and is the only connection the application ever saw.
        let native = try RawWebSocket(port: echo.port)
        #expect(native.upgrade().hasPrefix("HTTP/1.1 101"))
        #expect(await echo.log.wait { echo.log.openedIDs($0).count == 1 })
        try await Task.sleep(for: .milliseconds(100))
        #expect(echo.log.openedIDs().count == 1)
    }

    @Test("a same-origin Origin with an IP Host is accepted (Python's websocket-client sends one by default)")
    func sameOriginWithAnIPHostIsAccepted() async throws {
        let echo = try EchoServer()
        defer { echo.shutdown() }
        let raw = try RawWebSocket(port: echo.port)
        let head = raw.upgrade(host: "127.0.0.1:\(echo.port)", origin: "http://127.0.0.1:\(echo.port)")
        #expect(head.hasPrefix("HTTP/1.1 101"), "\(head)")
        #expect(await echo.log.wait { echo.log.openedIDs($0).count == 1 })
        // Case does not matter (an origin is ASCII case-insensitive), and localhost is a fixed name.
        let local = try RawWebSocket(port: echo.port)
        #expect(local.upgrade(host: "LocalHost:\(echo.port)", origin: "http://localhost:\(echo.port)").hasPrefix("HTTP/1.1 101"))
        #expect(await echo.log.wait { echo.log.openedIDs($0).count == 2 })
    }

    @Test("a rebinding-style Host (a DNS name) is refused even when Origin matches it")
    func rebindableHostIsRefused() async throws {
        let echo = try EchoServer()
        defer { echo.shutdown() }
        let raw = try RawWebSocket(port: echo.port)
        let head = raw.upgrade(path: "/speakbridge.v1/pair", host: "evil.example:\(echo.port)",
                               origin: "http://evil.example:\(echo.port)")
        #expect(httpStatus(head) == 403, "\(head)")
        // Without an Origin the Host is not judged: a native client may name the desktop however it likes.
        let native = try RawWebSocket(port: echo.port)
        #expect(native.upgrade(host: "desktop.example:\(echo.port)").hasPrefix("HTTP/1.1 101"))
        #expect(await echo.log.wait { echo.log.openedIDs($0).count == 1 })
    }

    @Test("the rule itself: which Host values are fixed, which Origins match", arguments: [
        // (origin, host, secure, allowed)
        (nil, nil, false, true),
        (nil, "evil.example", false, true),
        ("http://192.168.1.20:47810", "192.168.1.20:47810", false, true),
        ("https://192.168.1.20:47811", "192.168.1.20:47811", true, true),
        ("http://192.168.1.20:47811", "192.168.1.20:47811", true, false),
        ("http://[fe80::1]:47810", "[fe80::1]:47810", false, true),
        ("http://[::1]", "[::1]", false, true),
        ("http://desk.local:47810", "desk.local:47810", false, true),
        ("http://DESK.LOCAL:47810", "desk.local:47810", false, true),
        ("http://192.168.1.20:47810", "192.168.1.20", false, false),
        ("http://192.168.1.20", "192.168.1.20:47810", false, false),
        ("http://evil.example:47810", "evil.example:47810", false, false),
        ("http://local:47810", "local:47810", false, false),
        ("http://.local:47810", ".local:47810", false, false),
        ("http://desk.local.:47810", "desk.local.:47810", false, false),
        ("http://127.1:47810", "127.1:47810", false, false),
        ("http://127.0.0.1:47810", nil, false, false),
        ("http://127.0.0.1:47810/", "127.0.0.1:47810", false, false),
        ("http://127.0.0.1:47810, http://127.0.0.1:47810", "127.0.0.1:47810", false, false),
        ("http://[fe80::1%eth0]:47810", "[fe80::1%eth0]:47810", false, false),
        ("http://127.0.0.1:", "127.0.0.1:", false, false),
        ("", "127.0.0.1", false, false),
    ] as [(String?, String?, Bool, Bool)])
    func rule(origin: String?, host: String?, secure: Bool, allowed: Bool) {
        #expect(UpgradeOrigin.allows(origin: origin, host: host, secure: secure) == allowed)
    }

    @Test("the TLS port: https://HOST is its same origin, an Origin of another site gets 403",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/curl")
                       && FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")))
    func securePort() throws {
        let dir = try SecureListenerTests.fixture()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let echo = try EchoServer(configuration: SecureListenerTests().configuration(dir))
        defer { echo.shutdown() }
        let port = try #require(echo.server.securePort)
        func status(origin: String) throws -> String {
            try SecureListenerTests.run([
                "/usr/bin/curl", "-sk", "--max-time", "3", "-o", "/dev/null", "-w", "%{http_code}",
                "-H", "Connection: Upgrade", "-H", "Upgrade: websocket", "-H", "Sec-WebSocket-Version: 13",
                "-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "-H", "Sec-WebSocket-Protocol: speakbridge.v1",
                "-H", "Origin: \(origin)", "https://127.0.0.1:\(port)/speakbridge.v1/pair",
            ]).output
        }
        #expect(try status(origin: "https://evil.example") == "403")
        #expect(try status(origin: "http://127.0.0.1:\(port)") == "403")
        #expect(try status(origin: "https://127.0.0.1:\(port)") == "101")
    }
}
