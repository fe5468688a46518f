import SpeakBridgeProtocol

/// The answer to `status`; `json` is exactly what `status --json` prints (scripts depend on every key).
public struct StatusReply: Sendable, Equatable {
    public struct Sink: Sendable, Equatable {
        public var label: String
        public var problem: String?
        public var queued: Int64
        /// How the sink works (typing and clipboard sinks name their tool and why), when it says.
        public var method: String?
        public init(label: String, problem: String?, queued: Int64, method: String? = nil) {
            self.label = label
            self.problem = problem
            self.queued = queued
            self.method = method
        }
    }

    public struct Connected: Sendable, Equatable {
        public var device: String
        public var name: String
        public var connections: Int64
        public init(device: String, name: String, connections: Int64) {
            self.device = device
            self.name = name
            self.connections = connections
        }
    }

    public struct Session: Sendable, Equatable {
        public var device: String
        public var name: String
        public var session: String
        public var delivered: Int64
        public init(device: String, name: String, session: String, delivered: Int64) {
            self.device = device
            self.name = name
            self.session = session
            self.delivered = delivered
        }
    }

    public struct MDNS: Sendable, Equatable {
        public var enabled: Bool
        /// For people: "published as …", "inactive: …", "disabled (--no-mdns)".
        public var state: String
        public var active: Bool?
        /// The service name as published (after avahi renamed it on a collision), or nil while not published.
        public var name: String?
        public init(enabled: Bool, state: String, active: Bool?, name: String?) {
            self.enabled = enabled
            self.state = state
            self.active = active
            self.name = name
        }
    }

    /// The browser route (`web` in `status --json`): off and why; offered but not started (no browser device paired
    /// yet, or its last start failed) and why; or listening with its page and certificate.
    public struct Web: Sendable, Equatable {
        /// The route is offered (false: `--no-web`, no AES-NI, no page files).
        public var enabled: Bool
        /// Offered: whether its TLS listener is up (the front starts when a browser device is paired or
        /// `pair --web` asks). nil from a daemon that started the front with itself (then `enabled` meant listening).
        public var listening: Bool?
        /// Off or not started: why ("disabled (--no-web)", no AES-NI, "no browser device paired; …", a failed start).
        public var reason: String?
        /// On: the page a phone opens (https://ADDRESS:PORT/), its port, the certificate's SHA-256 fingerprint
        /// (colon-separated hex, as browsers show it), the base64 SHA-256 of its public key (for
        /// `--ignore-certificate-errors-spki-list`) and the addresses it names.
        public var url: String?
        public var port: Int64?
        public var fingerprint: String?
        public var spki: String?
        public var addresses: [String]

        public init(enabled: Bool, listening: Bool? = nil, reason: String? = nil, url: String? = nil, port: Int64? = nil,
                    fingerprint: String? = nil, spki: String? = nil, addresses: [String] = []) {
            self.enabled = enabled
            self.listening = listening
            self.reason = reason
            self.url = url
            self.port = port
            self.fingerprint = fingerprint
            self.spki = spki
            self.addresses = addresses
        }

        public static func off(_ reason: String) -> Web { Web(enabled: false, reason: reason) }
        public static func notStarted(_ reason: String) -> Web { Web(enabled: true, listening: false, reason: reason) }

        public var json: JSONValue {
            guard enabled else { return .object([("enabled", .bool(false)), ("reason", .string(reason ?? "?"))]) }
            if listening == false {
                return .object([("enabled", .bool(true)), ("listening", .bool(false)), ("reason", .string(reason ?? "?"))])
            }
            return .object([("enabled", .bool(true))] + (listening.map { [("listening", .bool($0))] } ?? []) + [
                ("url", .string(url ?? "")), ("port", .integer(port ?? 0)),
                ("fingerprint", .string(fingerprint ?? "")), ("spki", .string(spki ?? "")),
                ("addresses", .array(addresses.map { .string($0) })),
            ])
        }

        public init(json j: JSONValue) {
            self.init(enabled: j["enabled"]?.boolValue ?? false, listening: j["listening"]?.boolValue,
                      reason: j["reason"]?.stringValue,
                      url: j["url"]?.stringValue, port: j["port"]?.int64Value, fingerprint: j["fingerprint"]?.stringValue,
                      spki: j["spki"]?.stringValue, addresses: j["addresses"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        }
    }

    public var id: String
    public var name: String
    public var pid: Int64
    public var host: String
    public var port: Int64
    public var addresses: [String]
    public var uptime: Int64
    public var pairing: Bool
    public var sinks: [Sink]
    public var devices: [DeviceEntry]
    public var connections: Int64
    public var authenticated: Int64
    public var connected: [Connected]
    public var sessions: [Session]
    public var chunksDelivered: Int64
    public var duplicatesDropped: Int64
    public var closedNormally: Int64
    public var closedOnError: Int64
    public var rejected: Int64
    public var pairingFailures: Int64
    public var mdns: MDNS
    /// nil from a daemon without the browser route (no `web` member).
    public var web: Web?

    public init(id: String, name: String, pid: Int64, host: String, port: Int64, addresses: [String], uptime: Int64,
                pairing: Bool, sinks: [Sink], devices: [DeviceEntry], connections: Int64, authenticated: Int64,
                connected: [Connected], sessions: [Session], chunksDelivered: Int64, duplicatesDropped: Int64,
                closedNormally: Int64, closedOnError: Int64, rejected: Int64, pairingFailures: Int64, mdns: MDNS,
                web: Web? = nil) {
        self.web = web
        self.id = id
        self.name = name
        self.pid = pid
        self.host = host
        self.port = port
        self.addresses = addresses
        self.uptime = uptime
        self.pairing = pairing
        self.sinks = sinks
        self.devices = devices
        self.connections = connections
        self.authenticated = authenticated
        self.connected = connected
        self.sessions = sessions
        self.chunksDelivered = chunksDelivered
        self.duplicatesDropped = duplicatesDropped
        self.closedNormally = closedNormally
        self.closedOnError = closedOnError
        self.rejected = rejected
        self.pairingFailures = pairingFailures
        self.mdns = mdns
    }

    public var json: JSONValue {
        let sinks: [JSONValue] = self.sinks.map { s in
            var m: [(String, JSONValue)] = [("sink", .string(s.label)), ("healthy", .bool(s.problem == nil)),
                                            ("queued", .integer(s.queued))]
            if let p = s.problem { m.append(("problem", .string(p))) }
            if let method = s.method { m.append(("method", .string(method))) }
            return .object(m)
        }
        var mdns: [(String, JSONValue)] = [("enabled", .bool(self.mdns.enabled)), ("state", .string(self.mdns.state))]
        if let active = self.mdns.active { mdns.append(("active", .bool(active))) }
        mdns.append(("name", self.mdns.name.map { .string($0) } ?? .null))
        return success([
            ("id", .string(id)), ("name", .string(name)), ("pid", .integer(pid)), ("host", .string(host)),
            ("port", .integer(port)), ("addresses", .array(addresses.map { .string($0) })),
            ("uptime", .integer(uptime)), ("pairing", .bool(pairing)), ("sinks", .array(sinks)),
            ("devices", .array(devices.map(\.json))),
            ("connections", .integer(connections)), ("authenticated", .integer(authenticated)),
            ("connected", .array(connected.map { .object([("device", .string($0.device)), ("name", .string($0.name)),
                                                          ("connections", .integer($0.connections))]) })),
            ("sessions", .array(sessions.map { .object([("device", .string($0.device)), ("name", .string($0.name)),
                                                        ("session", .string($0.session)),
                                                        ("delivered", .integer($0.delivered))]) })),
            ("chunksDelivered", .integer(chunksDelivered)), ("duplicatesDropped", .integer(duplicatesDropped)),
            // Each closed connection counts once, in one of these (see `DesktopStats`).
            ("closedNormally", .integer(closedNormally)), ("closedOnError", .integer(closedOnError)),
            ("rejected", .integer(rejected)), ("pairingFailures", .integer(pairingFailures)),
            ("mdns", .object(mdns)),
        ] + (web.map { [("web", $0.json)] } ?? []))
    }

    public init(json j: JSONValue) throws(ControlFailure) {
        if let failure = ControlFailure(json: j) { throw failure }
        func int(_ v: JSONValue?) -> Int64 { v?.int64Value ?? 0 }
        func str(_ v: JSONValue?) -> String { v?.stringValue ?? "" }
        let m = j["mdns"]
        self.init(
            id: str(j["id"]), name: str(j["name"]), pid: int(j["pid"]), host: str(j["host"]), port: int(j["port"]),
            addresses: j["addresses"]?.arrayValue?.compactMap(\.stringValue) ?? [], uptime: int(j["uptime"]),
            pairing: j["pairing"]?.boolValue ?? false,
            sinks: (j["sinks"]?.arrayValue ?? []).map {
                Sink(label: $0["sink"]?.stringValue ?? "?", problem: $0["problem"]?.stringValue, queued: int($0["queued"]),
                     method: $0["method"]?.stringValue)
            },
            devices: (j["devices"]?.arrayValue ?? []).compactMap(DeviceEntry.init(json:)),
            connections: int(j["connections"]), authenticated: int(j["authenticated"]),
            connected: (j["connected"]?.arrayValue ?? []).map {
                Connected(device: str($0["device"]), name: str($0["name"]), connections: int($0["connections"]))
            },
            sessions: (j["sessions"]?.arrayValue ?? []).map {
                Session(device: str($0["device"]), name: str($0["name"]), session: str($0["session"]),
                        delivered: int($0["delivered"]))
            },
            chunksDelivered: int(j["chunksDelivered"]), duplicatesDropped: int(j["duplicatesDropped"]),
            closedNormally: int(j["closedNormally"]), closedOnError: int(j["closedOnError"]),
            rejected: int(j["rejected"]), pairingFailures: int(j["pairingFailures"]),
            mdns: MDNS(enabled: m?["enabled"]?.boolValue ?? false, state: m?["state"]?.stringValue ?? "?",
                       active: m?["active"]?.boolValue, name: m?["name"]?.stringValue),
            web: j["web"].map(Web.init(json:)))
    }
}

/// A paired device as `devices --json` prints it: from the daemon with its per-session delivery levels, from
/// the files with the addresses a desktop was reached at.
public struct DeviceEntry: Sendable, Equatable {
    public var id: String
    public var name: String
    public var role: String
    /// `native` or `browser` (nil from a daemon that predates kinds: no member).
    public var kind: String?
    /// Browser devices: the user agent in short.
    public var agent: String?
    public var pairedAt: Int64
    public var lastSeen: Int64?
    /// Desktops only (from the files): addresses that worked.
    public var addresses: [String]
    /// From the daemon only: per session, the highest sequence number any sink recorded.
    public var delivered: [(session: String, seq: Int64)]?

    public init(id: String, name: String, role: String, pairedAt: Int64, lastSeen: Int64?, addresses: [String] = [],
                delivered: [(session: String, seq: Int64)]? = nil, kind: String? = nil, agent: String? = nil) {
        self.kind = kind
        self.agent = agent
        self.id = id
        self.name = name
        self.role = role
        self.pairedAt = pairedAt
        self.lastSeen = lastSeen
        self.addresses = addresses
        self.delivered = delivered
    }

    public static func == (a: DeviceEntry, b: DeviceEntry) -> Bool { a.json == b.json }

    public var json: JSONValue {
        var m: [(String, JSONValue)] = [("id", .string(id)), ("name", .string(name)), ("role", .string(role))]
        if let kind { m.append(("kind", .string(kind))) }
        m.append(("pairedAt", .integer(pairedAt)))
        if let lastSeen { m.append(("lastSeen", .integer(lastSeen))) }
        if let agent { m.append(("agent", .string(agent))) }
        if !addresses.isEmpty { m.append(("addresses", .array(addresses.map { .string($0) }))) }
        if let delivered { m.append(("delivered", .object(delivered.map { ($0.session, .integer($0.seq)) }))) }
        return .object(m)
    }

    public init?(json: JSONValue) {
        guard let id = json["id"]?.stringValue else { return nil }
        var delivered: [(session: String, seq: Int64)]?
        if case .object(let members)? = json["delivered"] {
            delivered = members.map { (session: $0.0, seq: $0.1.int64Value ?? 0) }
        }
        self.init(id: id, name: json["name"]?.stringValue ?? "", role: json["role"]?.stringValue ?? "",
                  pairedAt: json["pairedAt"]?.int64Value ?? 0, lastSeen: json["lastSeen"]?.int64Value,
                  addresses: json["addresses"]?.arrayValue?.compactMap(\.stringValue) ?? [], delivered: delivered,
                  kind: json["kind"]?.stringValue, agent: json["agent"]?.stringValue)
    }
}

/// The answer to `devices`: `{"ok":true,"devices":[…]}`.
public struct DevicesReply: Sendable, Equatable {
    public var devices: [DeviceEntry]
    public init(devices: [DeviceEntry]) { self.devices = devices }
    public var json: JSONValue { success([("devices", .array(devices.map(\.json)))]) }
    public init(json: JSONValue) throws(ControlFailure) {
        if let failure = ControlFailure(json: json) { throw failure }
        guard let list = json["devices"]?.arrayValue else { throw ControlFailure("the daemon sent no device list") }
        devices = list.compactMap(DeviceEntry.init(json:))
    }
}

/// The answer to `pair`: the code (its text form), when it expires, its lifetime in seconds, the desktop's ID;
/// for `pair` with `web`, also the page to open.
public struct PairReply: Sendable, Equatable {
    /// `pair --web`: wire members `url` (the page with the code in its fragment), `webCode` (that code: no
    /// addresses, the page dials its own origin) and `fingerprint` (the web certificate's SHA-256).
    public struct Web: Sendable, Equatable {
        public var url: String
        public var code: String
        public var fingerprint: String
        public init(url: String, code: String, fingerprint: String) {
            self.url = url
            self.code = code
            self.fingerprint = fingerprint
        }
    }

    public var code: String
    public var expires: Int64
    public var lifetime: Int64
    public var id: String
    public var web: Web?
    public init(code: String, expires: Int64, lifetime: Int64, id: String, web: Web? = nil) {
        self.code = code
        self.expires = expires
        self.lifetime = lifetime
        self.id = id
        self.web = web
    }
    public var json: JSONValue {
        var members: [(String, JSONValue)] = [("code", .string(code)), ("expires", .integer(expires)),
                                              ("lifetime", .integer(lifetime)), ("id", .string(id))]
        if let web {
            members += [("url", .string(web.url)), ("webCode", .string(web.code)), ("fingerprint", .string(web.fingerprint))]
        }
        return success(members)
    }
    public init(json: JSONValue) throws(ControlFailure) {
        if let failure = ControlFailure(json: json) { throw failure }
        guard let code = json["code"]?.stringValue else { throw ControlFailure("the daemon did not issue a code") }
        var web: Web?
        if let url = json["url"]?.stringValue {
            web = Web(url: url, code: json["webCode"]?.stringValue ?? code, fingerprint: json["fingerprint"]?.stringValue ?? "")
        }
        self.init(code: code, expires: json["expires"]?.int64Value ?? 0,
                  lifetime: json["lifetime"]?.int64Value ?? Int64(SpeakBridgeProtocol.pairingCodeLifetime),
                  id: json["id"]?.stringValue ?? "", web: web)
    }
}

/// The answer to `revoke`: the device that was revoked.
public struct RevokeReply: Sendable, Equatable {
    public var id: String
    public var name: String
    public init(id: String, name: String) {
        self.id = id
        self.name = name
    }
    public var json: JSONValue { success([("id", .string(id)), ("name", .string(name))]) }
    public init(json: JSONValue) throws(ControlFailure) {
        if let failure = ControlFailure(json: json) { throw failure }
        self.init(id: json["id"]?.stringValue ?? "", name: json["name"]?.stringValue ?? "")
    }
}

/// The answer to `type-here`: one sentence per typing sink naming the window it now types into.
public struct TypeHereReply: Sendable, Equatable {
    public var targets: [String]
    public init(targets: [String]) { self.targets = targets }
    public var json: JSONValue { success([("targets", .array(targets.map { .string($0) }))]) }
    public init(json: JSONValue) throws(ControlFailure) {
        if let failure = ControlFailure(json: json) { throw failure }
        self.init(targets: json["targets"]?.arrayValue?.compactMap(\.stringValue) ?? [])
    }
}
