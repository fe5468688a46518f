import SpeakBridgeControl
import SpeakBridgeProtocol
import Testing

/// The browser route's part of the control seam: `pair --web`, `status`'s `web` object, device kinds.
@Suite("Control seam: the browser route")
struct ControlWebTests {
    @Test("pair with web: {\"cmd\":\"pair\",\"web\":true}; without it the request is the plain pair")
    func pairRequest() throws {
        let wire = #"{"cmd":"pair","web":true}"#
        #expect(String(decoding: ControlRequest.pair(web: true).json.encoded(), as: UTF8.self) == wire)
        #expect(try ControlRequest(json: try JSONValue.parse(Array(wire.utf8))) == .pair(web: true))
        #expect(try ControlRequest(json: .object([("cmd", .string("pair")), ("web", .bool(false))])) == .pair(web: false))
    }

    @Test("pair --web's reply: url, webCode and fingerprint beside the plain members; decodes back")
    func pairReply() throws {
        let reply = PairReply(code: "SB1:LONG", expires: 10, lifetime: 120, id: "A",
                              web: .init(url: "https://192.0.2.1:47811/#SB1:SHORT", code: "SB1:SHORT", fingerprint: "AB:CD"))
        guard case .object(let members) = reply.json else { Issue.record("not an object"); return }
        #expect(members.map(\.0) == ["ok", "code", "expires", "lifetime", "id", "url", "webCode", "fingerprint"])
        #expect(try PairReply(json: reply.json) == reply)
        #expect(try PairReply(json: PairReply(code: "SB1:X", expires: 1, lifetime: 2, id: "B").json).web == nil)
    }

    @Test("status: web on (url, port, fingerprint, spki, addresses) or off with its reason; absent from an old daemon")
    func statusWeb() throws {
        var status = ControlMessagesTests.status
        #expect(status.json["web"] == nil)
        status.web = .init(enabled: true, url: "https://192.0.2.1:47811/", port: 47_811, fingerprint: "AB:CD",
                           spki: "base64=", addresses: ["192.0.2.1", "127.0.0.1"])
        let on = status.json["web"]
        guard case .object(let members)? = on else { Issue.record("no web object"); return }
        #expect(members.map(\.0) == ["enabled", "url", "port", "fingerprint", "spki", "addresses"])
        #expect(on?["url"] == .string("https://192.0.2.1:47811/"))
        #expect(try StatusReply(json: status.json) == status)
        status.web = .off("disabled (--no-web)")
        #expect(status.json["web"] == .object([("enabled", .bool(false)), ("reason", .string("disabled (--no-web)"))]))
        #expect(try StatusReply(json: status.json) == status)
    }

    @Test("a device entry carries its kind and, for a browser, the short user agent")
    func deviceKind() throws {
        let entry = DeviceEntry(id: "E", name: "browser", role: "client", pairedAt: 1, lastSeen: 2, delivered: [],
                                kind: "browser", agent: "Chrome 156 on Android")
        #expect(entry.json["kind"] == .string("browser"))
        #expect(entry.json["agent"] == .string("Chrome 156 on Android"))
        #expect(DeviceEntry(json: entry.json) == entry)
        #expect(DeviceEntry(id: "N", name: "n", role: "client", pairedAt: 1, lastSeen: nil, kind: "native").json["agent"] == nil)
    }
}
