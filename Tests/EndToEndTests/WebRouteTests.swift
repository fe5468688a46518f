import Foundation
import SpeakBridgeProtocol
import Testing

/// The browser route as the CLI sees it (the page itself is tested in Tests/web with headless Chromium):
/// `status --json`'s `web`, `pair --web --json`, and the route turned off (--no-web) with a reason. When the front
/// starts and a port taken at that moment: LazyWebFrontTests.
@Suite("Browser route (CLI)")
struct WebRouteTests {
    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test("pair --web --json has url and code, the code in the fragment; then status --json has web.url and web.fingerprint")
    func statusAndPairWeb() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        // The front starts with the first pair --web (LazyWebFrontTests).
        let out = try run(["pair", "--web", "--json"], home: pair.desktopHome)
        #expect(out.status == 0, "\(out.stderr)")
        let status = try Self.json(try run(["status", "--json"], home: pair.desktopHome).stdout)
        let web = try #require(status["web"] as? [String: Any])
        let url = try #require(web["url"] as? String)
        #expect(url.hasPrefix("https://127.0.0.1:") && url.hasSuffix("/"))
        #expect((web["fingerprint"] as? String)?.split(separator: ":").count == 32)
        let text = try run(["status"], home: pair.desktopHome).stdout
        #expect(text.contains("web page: \(url)"))

        let issued = try Self.json(out.stdout)
        let code = try #require(issued["code"] as? String)
        #expect(issued["url"] as? String == url + "#" + code)
        let parsed = try PairingCode.parse(code)
        #expect(parsed.addresses.isEmpty, "the page dials its own origin: the code needs no address")
        #expect(issued["fingerprint"] as? String == web["fingerprint"] as? String)
    }

    @Test("a pair --web code does not pair a native join (nothing saved, the code stays for the page); a pair code still does")
    func webCodeIsNotForNativeJoin() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        let out = try run(["pair", "--web", "--json"], home: pair.desktopHome)
        #expect(out.status == 0, "\(out.stderr)")
        let code = try #require(try Self.json(out.stdout)["code"] as? String)
        let join = try run(["join", code, "--address", "127.0.0.1:\(pair.port)", "--name", "laptop"], home: pair.phoneHome)
        #expect(join.status != 0, "a native device paired with a browser code: \(join.stdout)")
        #expect(join.stderr.contains("or it is a browser code from `speakbridge pair --web`"), "\(join.stderr)")
        // The page's address itself (what the QR holds) is named as such, before anything is dialled.
        let url = try #require(try Self.json(out.stdout)["url"] as? String)
        let byURL = try run(["join", url, "--name", "laptop"], home: pair.phoneHome)
        #expect(byURL.status != 0)
        #expect(byURL.stderr.contains("speakbridge: error: this is the address of the desktop's browser page (from "
                                      + "`speakbridge pair --web`)"), "\(byURL.stderr)")
        #expect(byURL.stderr.contains("run `speakbridge pair` (without --web) on the desktop"), "\(byURL.stderr)")
        let devices = try #require(try JSONSerialization.jsonObject(
            with: Data(try run(["devices", "--json"], home: pair.desktopHome).stdout.utf8)) as? [[String: Any]])
        #expect(devices.isEmpty, "\(devices)")
        let status = try Self.json(try run(["status", "--json"], home: pair.desktopHome).stdout)
        #expect(status["pairing"] as? Bool == true, "the native attempt used up or killed the page's code")

        try pair.join(name: "laptop")
        let after = try #require(try JSONSerialization.jsonObject(
            with: Data(try run(["devices", "--json"], home: pair.desktopHome).stdout.utf8)) as? [[String: Any]])
        #expect(after.map { $0["kind"] as? String } == ["native"])
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
}
