import SpeakBridgeProtocol
import SpeakBridgeSupport

/// One part of an offer: a batch is split into parts that each fit one frame; it is applied only once every
/// part has arrived on the same connection.
public struct OfferPart: Sendable, Equatable {
    public var batch: String
    public var part: Int
    public var parts: Int
    public var origin: ConfigOrigin
    public var entries: [ConfigUpdate]
    /// Replies to a pull: how many secrets the sender left out because its share mode is `public` (so the
    /// receiver can say why a key it expected did not come). Informational; 0 when absent.
    public var withheld: Int

    public init(batch: String, part: Int, parts: Int, origin: ConfigOrigin, entries: [ConfigUpdate], withheld: Int = 0) {
        self.batch = batch
        self.part = part
        self.parts = parts
        self.origin = origin
        self.entries = entries
        self.withheld = withheld
    }
}

/// Why an offer was sent. Informational: it never changes what the receiver does with the entries.
public enum ConfigOrigin: String, Sendable {
    /// The sender's user pushed (also: absent, or a value this version does not know).
    case push
    /// Answers the `config-pull` with the same batch ID.
    case reply
    /// A push the desktop's user staged earlier for this device.
    case staged
}

/// The config messages of PROTOCOL.md ("Config transfer").
public enum ConfigMessage: Sendable, Equatable {
    /// "Send me your keys (these, or all you share)"; answered by an offer with the same batch ID, or an error.
    case pull(batch: String, keys: [String]?)
    case offer(OfferPart)
    /// Answers a complete offer.
    case result(ConfigResult)
    /// Answers a message that was refused; `batch` names the batch or pull it refers to, when known.
    case error(batch: String?, code: String, message: String)
}

/// Encoding and strict decoding of config messages. Every limit is checked before anything is stored; a
/// message that breaks one is answered with `config-error` and changes nothing.
public enum ConfigWire {
    public static let pullType = "config-pull"
    public static let offerType = "config-offer"
    public static let resultType = "config-result"
    public static let errorType = "config-error"

    public static let maxEntriesPerPart = 256
    public static let maxParts = 64
    public static let maxEntriesPerBatch = 1_024
    public static let maxPullKeys = 256
    /// Encoded size a sender aims at for one part (a frame is 65,535 bytes; Noise adds a 16-byte tag).
    public static let partBudget = 60_000
    /// The bytes a `config-result`'s key lists may take (with their quotes and commas): the rest of the message
    /// (type, batch, status, the `omitted` counts) stays under 400 bytes, so it fits one transport message
    /// (65,519 bytes of plaintext) whatever a batch's 1,024 keys are.
    public static let resultBudget = 60_000

    // MARK: encoding

    public static func message(_ m: ConfigMessage) -> Message {
        switch m {
        case let .pull(batch, keys):
            var body: [(String, JSONValue)] = [("batch", .string(batch))]
            if let keys { body.append(("keys", .array(keys.map { .string($0) }))) }
            return .config(type: pullType, body: .object(body))
        case .offer(let p):
            var body: [(String, JSONValue)] = [
                ("batch", .string(p.batch)), ("part", .integer(Int64(p.part))), ("parts", .integer(Int64(p.parts))),
                ("origin", .string(p.origin.rawValue)), ("entries", .array(p.entries.map(entryJSON))),
            ]
            if p.withheld > 0 { body.append(("withheld", .integer(Int64(p.withheld)))) }
            return .config(type: offerType, body: .object(body))
        case .result(let r):
            // Keys are listed in order while they fit `resultBudget` (a key costs its bytes, two quotes and a
            // comma: keys need no escaping); from the first that does not, every further key is only counted.
            var budget = resultBudget
            var omitted = r.omitted
            func listed(_ keys: [String], _ count: inout Int) -> JSONValue {
                var out: [JSONValue] = []
                for key in keys {
                    let cost = key.utf8.count + 3
                    if cost > budget { budget = 0; count += 1; continue }
                    budget -= cost
                    out.append(.string(key))
                }
                return .array(out)
            }
            var body: [(String, JSONValue)] = [("batch", .string(r.batch)), ("status", .string(r.status.rawValue))]
            body.append(("applied", listed(r.applied, &omitted.applied)))
            body.append(("pending", listed(r.pending, &omitted.pending)))
            body.append(("unchanged", listed(r.unchanged, &omitted.unchanged)))
            body.append(("skipped", listed(r.skipped, &omitted.skipped)))
            if omitted.total > 0 {
                body.append(("omitted", .object([
                    ("applied", .integer(Int64(omitted.applied))), ("pending", .integer(Int64(omitted.pending))),
                    ("unchanged", .integer(Int64(omitted.unchanged))), ("skipped", .integer(Int64(omitted.skipped))),
                ])))
            }
            return .config(type: resultType, body: .object(body))
        case let .error(batch, code, text):
            var body: [(String, JSONValue)] = []
            if let batch { body.append(("batch", .string(batch))) }
            body += [("code", .string(code)), ("message", .string(String(text.prefix(512))))]
            return .config(type: errorType, body: .object(body))
        }
    }

    public static func entryJSON(_ u: ConfigUpdate) -> JSONValue {
        var m: [(String, JSONValue)] = [("key", .string(u.key)), ("version", .string(u.version.description))]
        switch u.body {
        case .value(let v): m.append(("value", v.json))
        case .secret(let s): m += [("value", .string(s)), ("secret", .bool(true))]
        case .deleted: m.append(("deleted", .bool(true)))
        }
        return .object(m)
    }

    /// A batch as offer parts, each under `partBudget` bytes and `maxEntriesPerPart` entries. An empty batch is
    /// one empty part (it still answers a pull). More than `maxParts` parts or `maxEntriesPerBatch` entries is refused
    /// (`too-large`): a batch is applied whole, so the receiver must be able to hold all of it.
    /// `withheld` (replies to a pull) goes on the first part.
    public static func offer(batch: String, origin: ConfigOrigin, updates: [ConfigUpdate],
                             withheld: Int = 0) throws(ConfigError) -> [ConfigMessage] {
        guard updates.count <= maxEntriesPerBatch else {
            throw ConfigError(.tooLarge, "\(updates.count) keys are too many for one batch (at most \(maxEntriesPerBatch))",
                              hint: "name fewer keys")
        }
        var groups: [[ConfigUpdate]] = [[]]
        var size = 200
        for u in updates {
            let entrySize = entryJSON(u).encoded().count + 1
            if !groups[groups.count - 1].isEmpty && (size + entrySize > partBudget || groups[groups.count - 1].count == maxEntriesPerPart) {
                groups.append([])
                size = 200
            }
            groups[groups.count - 1].append(u)
            size += entrySize
        }
        guard groups.count <= maxParts else {
            throw ConfigError(.tooLarge, "the values are too large for one batch (\(groups.count) frames, at most \(maxParts))",
                              hint: "name fewer keys")
        }
        return groups.enumerated().map { i, entries in
            .offer(OfferPart(batch: batch, part: i + 1, parts: groups.count, origin: origin, entries: entries,
                             withheld: i == 0 ? withheld : 0))
        }
    }

    // MARK: decoding

    /// The typed message of a `.config(type:body:)` envelope (which `MessageCodec` produced). The one place a
    /// config message is decoded; outside tests and the fuzzer only `ConfigMachine.handle(.received…)` calls it.
    public static func decode(type: String, body: JSONValue) throws(ConfigError) -> ConfigMessage {
        switch type {
        case pullType:
            let batch = try batchID(body["batch"])
            var keys: [String]?
            if let list = body["keys"], list != .null {
                guard let items = list.arrayValue else { throw ConfigError(.malformed, "\"keys\" must be an array of keys") }
                guard items.count <= maxPullKeys else { throw ConfigError(.tooLarge, "more than \(maxPullKeys) keys in one pull") }
                keys = try items.map { v throws(ConfigError) -> String in
                    guard let k = v.stringValue else { throw ConfigError(.malformed, "\"keys\" must be an array of keys") }
                    try ConfigKey.validate(k)
                    return k
                }
            }
            return .pull(batch: batch, keys: keys)
        case offerType:
            let batch = try batchID(body["batch"])
            guard let part = body["part"]?.int64Value, let parts = body["parts"]?.int64Value,
                  (1...Int64(maxParts)).contains(parts), (1...parts).contains(part) else {
                throw ConfigError(.malformed, "\"part\" and \"parts\" must be integers with 1 <= part <= parts <= \(maxParts)")
            }
            guard let items = body["entries"]?.arrayValue else { throw ConfigError(.malformed, "\"entries\" must be an array") }
            guard items.count <= maxEntriesPerPart else {
                throw ConfigError(.tooLarge, "more than \(maxEntriesPerPart) entries in one part")
            }
            var seen = Set<String>()
            var entries: [ConfigUpdate] = []
            for item in items {
                let u = try entry(item)
                guard seen.insert(u.key).inserted else { throw ConfigError(.malformed, "\(u.key) appears twice in one batch") }
                entries.append(u)
            }
            // Optional and informational: absent, null, another type or an unknown word is `push`.
            let origin = body["origin"]?.stringValue.flatMap(ConfigOrigin.init(rawValue:)) ?? .push
            var withheld = 0
            if let w = body["withheld"], w != .null {
                guard let n = w.int64Value, (0...Int64(maxEntriesPerBatch)).contains(n) else {
                    throw ConfigError(.malformed, "\"withheld\" must be an integer 0...\(maxEntriesPerBatch)")
                }
                withheld = Int(n)
            }
            return .offer(OfferPart(batch: batch, part: Int(part), parts: Int(parts), origin: origin, entries: entries,
                                    withheld: withheld))
        case resultType:
            let batch = try batchID(body["batch"])
            guard let status = body["status"]?.stringValue.flatMap(ConfigResult.Status.init(rawValue:)) else {
                throw ConfigError(.malformed, "\"status\" must be applied, pending, unchanged or denied")
            }
            func keys(_ field: String) -> [String] {
                (body[field]?.arrayValue ?? []).prefix(maxEntriesPerBatch).compactMap(\.stringValue).filter(ConfigKey.isValid)
            }
            var result = ConfigResult(batch: batch, status: status, applied: keys("applied"), pending: keys("pending"),
                                      unchanged: keys("unchanged"), skipped: keys("skipped"))
            // Informational counts: each 0 … maxEntriesPerBatch, anything else counts as 0.
            func count(_ field: String) -> Int {
                guard let n = body["omitted"]?[field]?.int64Value, (0...Int64(maxEntriesPerBatch)).contains(n) else { return 0 }
                return Int(n)
            }
            result.omitted = .init(applied: count("applied"), pending: count("pending"), unchanged: count("unchanged"),
                                   skipped: count("skipped"))
            return .result(result)
        case errorType:
            let batch = batchHint(body)
            let code = PeerText.escapedPrefix(body["code"]?.stringValue ?? "error", limit: 32)
            let text = PeerText.escapedPrefix(body["message"]?.stringValue ?? "", limit: 512)
            return .error(batch: batch, code: code, message: text)
        default:
            throw ConfigError(.unknownType, "unknown config message type \"\(PeerText.escape(type, limit: 32))\"")
        }
    }

    /// The `batch` of a body when it is a valid batch ID, else nil: what a `config-error` about a message that
    /// could not be decoded names (an invalid ID is never echoed back).
    public static func batchHint(_ body: JSONValue) -> String? {
        body["batch"]?.stringValue.flatMap { MessageCodec.isValidSessionID($0) ? $0 : nil }
    }

    /// `batch`: 1–64 characters of `A-Z a-z 0-9 . _ -` (the protocol's `session` type).
    static func batchID(_ v: JSONValue?) throws(ConfigError) -> String {
        guard let s = v?.stringValue, MessageCodec.isValidSessionID(s) else {
            throw ConfigError(.malformed, "\"batch\" must be 1-64 characters of A-Z a-z 0-9 . _ -")
        }
        return s
    }

    static func entry(_ v: JSONValue) throws(ConfigError) -> ConfigUpdate {
        guard case .object = v, let key = v["key"]?.stringValue else {
            throw ConfigError(.malformed, "an entry must be an object with a string \"key\"")
        }
        try ConfigKey.validate(key)
        guard let versionText = v["version"]?.stringValue else { throw ConfigError(.malformed, "\(key) has no \"version\"") }
        let version = try HLCTimestamp(parsing: versionText)
        if let deleted = v["deleted"], deleted != .null {
            guard deleted.boolValue != nil else { throw ConfigError(.malformed, "\"deleted\" of \(key) must be a boolean") }
            if deleted.boolValue == true { return ConfigUpdate(key: key, version: version, body: .deleted) }
        }
        guard let raw = v["value"] else { throw ConfigError(.malformed, "\(key) has neither \"value\" nor \"deleted\"") }
        let value = try ConfigValue(json: raw, key: key)
        var secret = false
        if let s = v["secret"], s != .null {
            guard let b = s.boolValue else { throw ConfigError(.malformed, "\"secret\" of \(key) must be a boolean") }
            secret = b
        }
        if secret {
            guard case .string(let text) = value else { throw ConfigError(.malformed, "the secret \(key) must be a string") }
            return ConfigUpdate(key: key, version: version, body: .secret(text))
        }
        return ConfigUpdate(key: key, version: version, body: .value(value))
    }
}
