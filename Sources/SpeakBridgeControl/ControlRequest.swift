import SpeakBridgeProtocol

/// What the CLI asks the running daemon, one request per connection on the control socket.
///
/// Wire: one JSON object and a newline, `{"cmd":"status"}`, `{"cmd":"pair"}` (`{"cmd":"pair","web":true}` for
/// the browser route's page URL too), `{"cmd":"devices"}`,
/// `{"cmd":"revoke","id":"…"}`, `{"cmd":"type-here"}`. Answers: `{"ok":true,…}` (the members of the request's reply type) or
/// `{"ok":false,"error":"…","hint":"…"}` (`ControlFailure`).
public enum ControlRequest: Sendable, Equatable {
    case status
    /// `web`: also the URL of the desktop's page with the code in its fragment (`speakbridge pair --web`).
    case pair(web: Bool)
    case devices
    /// A device ID, an unambiguous ID prefix, or a name.
    case revoke(String)
    /// `speakbridge type --here`: the typing sinks type held and later text into the window focused now.
    case typeHere

    public var json: JSONValue {
        switch self {
        case .status: return .object([("cmd", .string("status"))])
        case .pair(let web):
            return .object([("cmd", .string("pair"))] + (web ? [("web", .bool(true))] : []))
        case .devices: return .object([("cmd", .string("devices"))])
        case .revoke(let id): return .object([("cmd", .string("revoke")), ("id", .string(id))])
        case .typeHere: return .object([("cmd", .string("type-here"))])
        }
    }

    /// The request in `json`, or the failure the daemon answers with.
    public init(json: JSONValue) throws(ControlFailure) {
        switch json["cmd"]?.stringValue {
        case "status": self = .status
        case "pair": self = .pair(web: json["web"]?.boolValue == true)
        case "devices": self = .devices
        case "revoke":
            guard let id = json["id"]?.stringValue else { throw ControlFailure("revoke needs an id") }
            self = .revoke(id)
        case "type-here": self = .typeHere
        default:
            throw ControlFailure("unknown command", hint: "this daemon speaks status, pair, devices, revoke, type-here")
        }
    }
}

/// A refused request: `{"ok":false,"error":…,"hint":…}`, and for an ambiguous revoke the devices it could mean.
public struct ControlFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public var error: String
    public var hint: String?
    /// `revoke` only: every device the query matched (ID, name, role, last seen).
    public var matches: [DeviceSummary]

    public init(_ error: String, hint: String? = nil, matches: [DeviceSummary] = []) {
        self.error = error
        self.hint = hint
        self.matches = matches
    }

    public var description: String { error }

    public var json: JSONValue {
        var m: [(String, JSONValue)] = [("ok", .bool(false)), ("error", .string(error))]
        if let hint { m.append(("hint", .string(hint))) }
        if !matches.isEmpty { m.append(("matches", .array(matches.map(\.json)))) }
        return .object(m)
    }

    /// nil when `json` is a success.
    public init?(json: JSONValue) {
        guard json["ok"]?.boolValue != true else { return nil }
        self.init(json["error"]?.stringValue ?? "the daemon refused the request", hint: json["hint"]?.stringValue,
                  matches: json["matches"]?.arrayValue?.compactMap(DeviceSummary.init(json:)) ?? [])
    }
}

/// `{"ok":true}` and `members`.
func success(_ members: [(String, JSONValue)]) -> JSONValue {
    .object([("ok", .bool(true))] + members)
}

/// A device in a list of matches: ID, name, role, last seen (seconds since 1970).
public struct DeviceSummary: Sendable, Equatable {
    public var id: String
    public var name: String
    public var role: String
    public var lastSeen: Int64?

    public init(id: String, name: String, role: String, lastSeen: Int64?) {
        self.id = id
        self.name = name
        self.role = role
        self.lastSeen = lastSeen
    }

    public var json: JSONValue {
        var m: [(String, JSONValue)] = [("id", .string(id)), ("name", .string(name)), ("role", .string(role))]
        if let lastSeen { m.append(("lastSeen", .integer(lastSeen))) }
        return .object(m)
    }

    public init?(json: JSONValue) {
        guard let id = json["id"]?.stringValue else { return nil }
        self.init(id: id, name: json["name"]?.stringValue ?? "", role: json["role"]?.stringValue ?? "",
                  lastSeen: json["lastSeen"]?.int64Value)
    }
}
