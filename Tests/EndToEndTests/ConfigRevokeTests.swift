#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// Found by review (a stolen phone key): a change the phone offered under policy `ask` survived `devices revoke`,
/// its secret stayed in secrets.json, and a plain `config accept` applied it.
@Suite("End to end: a revoked device's pending config", .serialized)
struct ConfigRevokeTests {
    static let planted = "sk-or-v1-planted-by-a-stolen-phone"

    func offerPlantedSecret(_ pair: Pair) throws {
        let link = try ConfigLink(pair)
        defer { link.close() }
        let entry = JSONValue.object([("key", .string("openrouter.apiKey")), ("version", .string(link.version())),
                                      ("value", .string(Self.planted)), ("secret", .bool(true))])
        link.send(type: "config-offer", [("batch", .string("b1")), ("part", .integer(1)), ("parts", .integer(1)),
                                         ("entries", .array([entry]))])
        guard case .config("config-result", let result) = try link.receive() else { throw HarnessError("no config-result") }
        #expect(result["status"]?.stringValue == "pending", "\(result)")
    }

    func secrets(_ pair: Pair) -> String {
        (try? String(contentsOfFile: pair.desktopHome + "/config/secrets.json", encoding: .utf8)) ?? ""
    }

    func check(_ pair: Pair, revoke: Outcome) throws {
        #expect(revoke.status == 0, "\(revoke.stderr)")
        let pending = try run(["config", "pending", "--json"], home: pair.desktopHome)
        #expect(pending.status == 0 && pending.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[]", "\(pending.stdout)")
        let accept = try run(["config", "accept"], home: pair.desktopHome)
        #expect(accept.status == 0 && accept.stderr.contains("nothing pending"), "\(accept.stderr)")
        #expect(try run(["config", "get", "openrouter.apiKey"], home: pair.desktopHome).status != 0, "nothing applied")
        #expect(!secrets(pair).contains(Self.planted), "the planted secret is gone from secrets.json")
    }

    @Test("an offer held under policy ask, then devices revoke (daemon running): pending empty, accept applies nothing, secret gone")
    func revokeWithDaemon() throws {
        let pair = Pair()
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        defer { pair.stop() }
        try offerPlantedSecret(pair)
        #expect(secrets(pair).contains(Self.planted), "held pending: its secret is in the backend")
        try check(pair, revoke: try run(["devices", "revoke", "phone"], home: pair.desktopHome))
    }

    @Test("a pending change from a device no longer paired (left by an older version): marked, never accepted, rejectable")
    func leftoverFromUnpairedDevice() throws {
        let pair = Pair()
        defer { pair.stop() }
        #expect(try run(["config", "list"], home: pair.desktopHome).status == 0)  // creates the home
        let gone = "081040G2081040G2"  // no device of this home
        let ms = Int64(Date().timeIntervalSince1970 * 1_000)
        let doc = JSONValue.object([
            ("version", .integer(1)), ("clock", .object([("ms", .integer(ms)), ("counter", .integer(0))])),
            ("entries", .array([])),
            ("pending", .array([.object([("from", .string("0810-40G2-0810-40G2")), ("name", .string("old phone")),
                                         ("received", .integer(ms / 1_000)), ("key", .string("ui.theme")),
                                         ("version", .string("\(ms):0:\(gone)")), ("value", .string("evil"))])])),
        ])
        try FileIO.atomicWrite(pair.desktopHome + "/config/settings.json", doc.encoded())

        let pending = try run(["config", "pending"], home: pair.desktopHome)
        #expect(pending.stdout.contains("ui.theme") && pending.stdout.contains("no longer paired"), "\(pending.stdout)")
        #expect(try run(["config", "pending", "--json"], home: pair.desktopHome).stdout.contains(#""paired":false"#))
        let accept = try run(["config", "accept"], home: pair.desktopHome)
        #expect(accept.status == 0 && accept.stderr.contains("not applied 1 from a device that is no longer paired"), "\(accept.stderr)")
        #expect(try run(["config", "get", "ui.theme"], home: pair.desktopHome).status != 0, "nothing applied")
        #expect(try run(["config", "reject", "ui.theme"], home: pair.desktopHome).status == 0)
        #expect(try run(["config", "pending"], home: pair.desktopHome).stderr.contains("nothing pending"))
    }

    @Test("the same with the daemon stopped before the revoke (the CLI works on the files)")
    func revokeWithoutDaemon() throws {
        let pair = Pair()
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        defer { pair.stop() }
        try offerPlantedSecret(pair)
        pair.daemon?.terminate()
        let revoke = try run(["devices", "revoke", "phone"], home: pair.desktopHome)
        #expect(revoke.stderr.contains("dropped 1 pending config change(s)"), "\(revoke.stderr)")
        try check(pair, revoke: revoke)
    }
}
