import Foundation
import SpeakBridgeProtocol
import Testing

/// The browser route as the CLI sees it (the page itself is tested in Tests/web with headless Chromium):
/// `status --json`'s `web`, `pair --web --json`, and the route turned off (--no-web, a taken port) with a reason.
@Suite("Browser route (CLI)")
struct WebRouteTests {
    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test("status --json has web.url and web.fingerprint; pair --web --json has url and code, the code in the fragment")
    func statusAndPairWeb() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        let status = try Self.json(try run(["status", "--json"], home: pair.desktopHome).stdout)
        let web = try #require(status["web"] as? [String: Any])
        let url = try #require(web["url"] as? String)
        #expect(url.hasPrefix("https://127.0.0.1:") && url.hasSuffix("/"))
        #expect((web["fingerprint"] as? String)?.split(separator: ":").count == 32)
        let text = try run(["status"], home: pair.desktopHome).stdout
        #expect(text.contains("web page: \(url)"))

        let out = try run(["pair", "--web", "--json"], home: pair.desktopHome)
        #expect(out.status == 0, "\(out.stderr)")
        let issued = try Self.json(out.stdout)
        let code = try #require(issued["code"] as? String)
        #expect(issued["url"] as? String == url + "#" + code)
        let parsed = try PairingCode.parse(code)
        #expect(parsed.addresses.isEmpty, "the page dials its own origin: the code needs no address")
        #expect(issued["fingerprint"] as? String == web["fingerprint"] as? String)
    }

    @Test("--no-web: pair --web says the desktop does not offer the route and why; native pairing still works")
    func noWeb() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"], extra: ["--no-web"])
        let out = try run(["pair", "--web"], home: pair.desktopHome)
        #expect(out.status != 0)
        #expect(out.stderr.contains("speakbridge: error: this desktop does not offer the browser route: disabled (--no-web)"))
        let web = try #require(try Self.json(try run(["status", "--json"], home: pair.desktopHome).stdout)["web"] as? [String: Any])
        #expect(web["enabled"] as? Bool == false)
        try pair.join()
    }

    @Test("a web port in use turns the route off with the reason; the daemon still serves native clients")
    func webPortTaken() throws {
        // Hold a port: a listening socket on 127.0.0.1, ephemeral.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        _ = listen(fd, 1)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        let taken = Int(UInt16(bigEndian: address.sin_port))

        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"], extra: ["--web-port", String(taken)])
        let web = try #require(try Self.json(try run(["status", "--json"], home: pair.desktopHome).stdout)["web"] as? [String: Any])
        #expect(web["enabled"] as? Bool == false)
        #expect((web["reason"] as? String)?.contains("--web-port") == true)
        try pair.join()
    }
}
