import SpeakBridgeProtocol

/// Everything of one installation's config except secret values: `config/settings.json` (0600).
///
/// ```
/// {"version":1,"clock":{"ms":…,"counter":…},"policy":{"default":"ask","devices":{"ID":"accept"}},"share":"public",
///  "localOnly":["key"],
///  "entries":[{"key":"k","version":"MS:C:DEVICE","value":…} | {…,"secret":true,"ref":"…"} | {…,"deleted":true}],
///  "pending":[{"from":"ID","name":"phone","received":UNIX,"bytes":N, <entry fields>}]}
/// ```
public struct ConfigDocument: Sendable, Equatable {
    public var clock = HybridLogicalClock()
    public var policy = PolicySettings()
    public var localOnly: Set<String> = []
    public var records: [String: ConfigRecord] = [:]
    /// Changes waiting for consent, per (key, device that offered it).
    public var pending: [PendingRecord.ID: PendingRecord] = [:]

    public init() {}

    /// The pending changes of `key`, from every device that offered one.
    public func pending(of key: String) -> [PendingRecord] {
        pending.values.filter { $0.record.key == key }
    }

    /// Secret references that records and pending changes use (the rest of the backend is garbage).
    var referencedSecrets: Set<String> {
        var refs = Set(records.values.compactMap(\.secretRef))
        refs.formUnion(pending.values.compactMap(\.record.secretRef))
        return refs
    }

    // MARK: file format

    func encoded() -> [UInt8] {
        let devices = policy.devices.sorted { $0.key.description < $1.key.description }
            .map { ($0.key.description, JSONValue.string($0.value.rawValue)) }
        let doc: JSONValue = .object([
            ("version", .integer(1)),
            ("clock", .object([("ms", .integer(Int64(clamping: clock.ms))), ("counter", .integer(Int64(clock.counter)))])),
            ("policy", .object([("default", .string(policy.defaultPolicy.rawValue)), ("devices", .object(devices))])),
            ("share", .string(policy.share.rawValue)),
            // Marks `all` as the user's own choice (`config share all`); see `decode`.
            ("shareConfirmed", .bool(policy.share == .all)),
            ("localOnly", .array(localOnly.sorted().map { .string($0) })),
            ("entries", .array(records.keys.sorted().map { Self.json(records[$0]!) })),
            ("pending", .array(pending.keys.sorted().map { id in
                let p = pending[id]!
                guard case .object(let fields) = Self.json(p.record) else { return .null }
                return .object([("from", .string(p.from.description)), ("name", .string(p.fromName)),
                                ("received", .integer(p.received)), ("bytes", .integer(Int64(p.bytes)))] + fields)
            })),
        ])
        return doc.encoded() + [0x0A]
    }

    static func json(_ r: ConfigRecord) -> JSONValue {
        var m: [(String, JSONValue)] = [("key", .string(r.key)), ("version", .string(r.version.description))]
        switch r.body {
        case .value(let v): m.append(("value", v.json))
        case .secret(let ref): m += [("secret", .bool(true)), ("ref", .string(ref))]
        case .deleted: m.append(("deleted", .bool(true)))
        }
        return .object(m)
    }

    static func record(_ v: JSONValue) throws(ConfigError) -> ConfigRecord {
        guard let key = v["key"]?.stringValue, ConfigKey.isValid(key),
              let versionText = v["version"]?.stringValue else { throw damaged }
        let version = try HLCTimestamp(parsing: versionText)
        if v["deleted"]?.boolValue == true { return ConfigRecord(key: key, version: version, body: .deleted) }
        if v["secret"]?.boolValue == true {
            guard let ref = v["ref"]?.stringValue else { throw damaged }
            return ConfigRecord(key: key, version: version, body: .secret(ref: ref))
        }
        guard let value = v["value"] else { throw damaged }
        do {
            return ConfigRecord(key: key, version: version, body: .value(try ConfigValue(json: value, key: key)))
        } catch {
            // A value no entry point accepts (e.g. a number beyond ±(2^53 - 1), which earlier versions stored, or
            // an edit by hand): say which key, and how to get going again.
            throw ConfigError.local("settings.json cannot be read: \(error.message)",
                                    hint: "edit that entry in settings.json (put the number in quotes to keep it as text) or move the file away (config starts empty)")
        }
    }

    static let damaged = ConfigError.local("settings.json is damaged",
                                           hint: "restore it from a backup, or move it away (config starts empty)")

    static func decode(_ bytes: [UInt8]) throws(ConfigError) -> ConfigDocument {
        guard let doc = try? JSONValue.parse(bytes, maxDepth: 8, maxBytes: 64 << 20), doc["version"]?.int64Value == 1
        else { throw damaged }
        var d = ConfigDocument()
        if let ms = doc["clock"]?["ms"]?.int64Value, let counter = doc["clock"]?["counter"]?.int64Value,
           // Past `maxMillis` (an edited or damaged file) the clock starts afresh: one from there would stamp
           // versions no one can read back, and its next tick could overflow.
           (0...Int64(HLCTimestamp.maxMillis)).contains(ms), (0...Int64(UInt16.max)).contains(counter) {
            d.clock = HybridLogicalClock(ms: UInt64(ms), counter: UInt16(counter))
        }
        if let p = doc["policy"]?["default"]?.stringValue.flatMap(ConsentPolicy.init(rawValue:)) { d.policy.defaultPolicy = p }
        if case .object(let devices)? = doc["policy"]?["devices"] {
            for (id, value) in devices {
                guard let device = try? DeviceID(parsing: id),
                      let p = value.stringValue.flatMap(ConsentPolicy.init(rawValue:)) else { throw damaged }
                d.policy.devices[device] = p
            }
        }
        if let s = doc["share"]?.stringValue.flatMap(ShareMode.init(rawValue:)) { d.policy.share = s }
        // Versions before issue 8 wrote their default `"share":"all"` into every file, so a plain `all` may never
        // have been chosen: without the confirmation only non-secret keys are shared (run `config share all`).
        if d.policy.share == .all && doc["shareConfirmed"]?.boolValue != true { d.policy.share = .publicOnly }
        d.localOnly = Set(doc["localOnly"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        for item in doc["entries"]?.arrayValue ?? [] {
            let r = try record(item)
            d.records[r.key] = r
        }
        for item in doc["pending"]?.arrayValue ?? [] {
            let r = try record(item)
            guard let from = item["from"]?.stringValue.flatMap({ try? DeviceID(parsing: $0) }) else { throw damaged }
            // `bytes` as stored when it is plausible; otherwise measured (`PendingRecord.init`).
            let stored = item["bytes"]?.int64Value.flatMap { (0...Int64(ConfigKey.maxBytes + ConfigValue.maxStringBytes)).contains($0) ? Int($0) : nil }
            let p = PendingRecord(record: r, from: from, fromName: item["name"]?.stringValue ?? "",
                                  received: item["received"]?.int64Value ?? 0, bytes: stored)
            d.pending[p.id] = p
        }
        return d
    }
}

/// What the user staged on this machine for a device that will connect later (the desktop cannot dial a phone):
/// `state/config-outbox.json` (0600). Read by the daemon's config handler when that device starts a config
/// exchange; an item is removed once the device answered it.
public struct StagedOutbox: Sendable, Equatable {
    public struct Item: Sendable, Equatable {
        public enum Kind: String, Sendable { case push, pull }
        /// Also the batch ID on the wire.
        public var id: String
        public var device: DeviceID
        public var kind: Kind
        /// nil: every key (push: every shareable key; pull: everything the device shares).
        public var keys: [String]?
        public var staged: Int64

        public init(id: String, device: DeviceID, kind: Kind, keys: [String]?, staged: Int64) {
            self.id = id
            self.device = device
            self.kind = kind
            self.keys = keys
            self.staged = staged
        }
    }

    public var items: [Item] = []

    public init() {}

    /// Stages a push or a pull of `keys` (nil: every key) for `device`, merged with the item of that kind already
    /// staged for it. A merge that changes the keys gives the item a new ID (`newID`): the old one may be in
    /// flight, and the device's answer to it unstages that ID, which would drop the keys added since unsent.
    public mutating func stage(device: DeviceID, kind: Item.Kind, keys: [String]?, staged: Int64,
                               newID: () -> String) {
        guard let i = items.firstIndex(where: { $0.device == device && $0.kind == kind }) else {
            items.append(Item(id: newID(), device: device, kind: kind, keys: keys, staged: staged))
            return
        }
        let old = items[i].keys
        let merged = (old == nil || keys == nil) ? nil : Array(Set(old! + keys!)).sorted()
        guard merged != old else { return }
        items[i].keys = merged
        items[i].id = newID()
        items[i].staged = staged
    }

    func encoded() -> [UInt8] {
        JSONValue.object([("version", .integer(1)), ("staged", .array(items.map { i in
            var m: [(String, JSONValue)] = [("id", .string(i.id)), ("device", .string(i.device.description)),
                                            ("kind", .string(i.kind.rawValue)), ("staged", .integer(i.staged))]
            if let keys = i.keys { m.append(("keys", .array(keys.map { .string($0) }))) }
            return .object(m)
        }))]).encoded() + [0x0A]
    }

    static func decode(_ bytes: [UInt8]) throws(ConfigError) -> StagedOutbox {
        let damaged = ConfigError.local("config-outbox.json is damaged", hint: "move it away; staged pushes and pulls are lost")
        guard let doc = try? JSONValue.parse(bytes, maxDepth: 6, maxBytes: 16 << 20),
              let list = doc["staged"]?.arrayValue else { throw damaged }
        var outbox = StagedOutbox()
        for v in list {
            guard let id = v["id"]?.stringValue,
                  let device = v["device"]?.stringValue.flatMap({ try? DeviceID(parsing: $0) }),
                  let kind = v["kind"]?.stringValue.flatMap(Item.Kind.init(rawValue:)) else { throw damaged }
            outbox.items.append(Item(id: id, device: device, kind: kind,
                                     keys: v["keys"]?.arrayValue?.compactMap(\.stringValue),
                                     staged: v["staged"]?.int64Value ?? 0))
        }
        return outbox
    }
}
