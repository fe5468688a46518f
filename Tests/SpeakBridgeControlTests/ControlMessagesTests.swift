import SpeakBridgeControl
import SpeakBridgeProtocol
import Testing

@Suite("Control seam: requests and replies")
struct ControlMessagesTests {
    @Test("requests keep their wire form and decode back; an unknown command or a revoke without id is refused")
    func requests() throws {
        for (request, wire) in [(ControlRequest.status, #"{"cmd":"status"}"#), (.pair(web: false), #"{"cmd":"pair"}"#),
                                (.devices, #"{"cmd":"devices"}"#), (.revoke("AB12"), #"{"cmd":"revoke","id":"AB12"}"#),
                                (.typeHere, #"{"cmd":"type-here"}"#)] {
            #expect(String(decoding: request.json.encoded(), as: UTF8.self) == wire)
            #expect(try ControlRequest(json: try JSONValue.parse(Array(wire.utf8))) == request)
        }
        #expect(throws: ControlFailure("unknown command", hint: "this daemon speaks status, pair, devices, revoke, type-here")) {
            try ControlRequest(json: .object([("cmd", .string("reboot"))]))
        }
        #expect(throws: ControlFailure("revoke needs an id")) { try ControlRequest(json: .object([("cmd", .string("revoke"))])) }
    }

    static let status = StatusReply(
        id: "AAAA-BBBB-CCCC-DDDD", name: "SpeakBridge AAAA", pid: 42, host: "127.0.0.1", port: 47_810,
        addresses: ["127.0.0.1"], uptime: 5, pairing: false,
        sinks: [.init(label: "stdout", problem: nil, queued: 0), .init(label: "clipboard", problem: "xclip failed", queued: 3)],
        devices: [DeviceEntry(id: "EEEE-FFFF-GGGG-HHHH", name: "pixel", role: "client", pairedAt: 1, lastSeen: 2,
                              delivered: [("s", 5)])],
        connections: 2, authenticated: 1, connected: [.init(device: "EEEE-FFFF-GGGG-HHHH", name: "pixel", connections: 1)],
        sessions: [.init(device: "EEEE-FFFF-GGGG-HHHH", name: "pixel", session: "s", delivered: 5)],
        chunksDelivered: 5, duplicatesDropped: 1, closedNormally: 5, closedOnError: 0, rejected: 0, pairingFailures: 0,
        mdns: .init(enabled: true, state: "published as \"Desk #2\"", active: true, name: "Desk #2"))

    @Test("status: every key scripts read, in the daemon's order, mdns.name included; it decodes back unchanged")
    func statusRoundTrip() throws {
        let json = Self.status.json
        guard case .object(let members) = json else { Issue.record("not an object"); return }
        #expect(members.map(\.0) == ["ok", "id", "name", "pid", "host", "port", "addresses", "uptime", "pairing", "sinks",
                                     "devices", "connections", "authenticated", "connected", "sessions", "chunksDelivered",
                                     "duplicatesDropped", "closedNormally", "closedOnError", "rejected", "pairingFailures",
                                     "mdns"])
        #expect(json["mdns"]?["name"] == .string("Desk #2"))
        #expect(json["sinks"]?.arrayValue?[1]["healthy"] == .bool(false))
        #expect(json["devices"]?.arrayValue?[0]["delivered"]?["s"] == .integer(5))
        #expect(try StatusReply(json: json) == Self.status)
        var off = Self.status
        off.mdns = .init(enabled: false, state: "disabled (--no-mdns)", active: nil, name: nil)
        #expect(off.json["mdns"]?["name"] == .null)
        #expect(off.json["mdns"]?["active"] == nil)
        #expect(try StatusReply(json: off.json) == off)
    }

    @Test("a refusal decodes as such, with its hint and the devices an ambiguous revoke matched")
    func refusal() throws {
        let failure = ControlFailure("2 paired devices match \"vm\"", hint: "say which one by its ID",
                                     matches: [DeviceSummary(id: "A", name: "vm", role: "client", lastSeen: nil),
                                               DeviceSummary(id: "B", name: "vm", role: "client", lastSeen: 9)])
        #expect(failure.json["ok"] == .bool(false))
        #expect(throws: failure) { try RevokeReply(json: failure.json) }
        #expect(throws: failure) { try StatusReply(json: failure.json) }
        let pair = PairReply(code: "SB1:X", expires: 10, lifetime: 120, id: "A")
        #expect(try PairReply(json: pair.json) == pair)
        let revoked = RevokeReply(id: "A", name: "vm")
        #expect(try RevokeReply(json: revoked.json) == revoked)
        let devices = DevicesReply(devices: [DeviceEntry(id: "D", name: "desk", role: "desktop", pairedAt: 1, lastSeen: nil,
                                                         addresses: ["10.0.0.2"])])
        #expect(try DevicesReply(json: devices.json) == devices)
        #expect(devices.json["devices"]?.arrayValue?[0]["delivered"] == nil)
    }
}
