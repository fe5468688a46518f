import SpeakBridgeProtocol

/// Changes the user makes on this machine (`config set`, `unset`, `local-only`, `accept`, `reject`, `policy`),
/// and what this machine offers to a peer. All run inside `ConfigStore.update` / `read`.
extension ConfigTransaction {
    /// `config set`: a new version of `key`. `secret` nil means: keep a secret key secret, and treat keys named
    /// like credentials (`*.apiKey`, `*.token`, …) as secret. Secrets are strings. Returns the stored record.
    @discardableResult
    public mutating func set(_ key: String, _ value: ConfigValue, secret: Bool? = nil) throws(ConfigError) -> ConfigRecord {
        try ConfigKey.validate(key)
        try Self.refuseReserved(key)
        try value.validate(key: key)
        let existing = document.records[key]
        let isSecret = secret ?? ((existing?.isSecret ?? false) || ConfigKey.looksSecret(key))
        let body: ConfigRecord.Body
        if isSecret {
            guard case .string(let s) = value else {
                throw ConfigError(.malformed, "a secret is a string; \(key) was given a \(value.typeName)",
                                  hint: "pass --string to store it as text")
            }
            body = .secret(ref: putSecret(s))
        } else {
            body = .value(value)
        }
        let record = ConfigRecord(key: key, version: tick(), body: body)
        document.records[key] = record
        return record
    }

    /// `config unset`: a tombstone, newer than the value it hides, that syncs like a value.
    public mutating func unset(_ key: String) throws(ConfigError) {
        try ConfigKey.validate(key)
        try Self.refuseReserved(key)
        guard let existing = document.records[key], !existing.isDeleted else {
            throw ConfigError(.local, "\(key) is not set", hint: "list the keys with `speakbridge config list`")
        }
        document.records[key] = ConfigRecord(key: key, version: tick(), body: .deleted)
    }

    public mutating func setLocalOnly(_ key: String, _ on: Bool) throws(ConfigError) {
        try ConfigKey.validate(key)
        try Self.refuseReserved(key)
        if on { document.localOnly.insert(key) } else { document.localOnly.remove(key) }
    }

    static func refuseReserved(_ key: String) throws(ConfigError) {
        guard !ConfigKey.isReserved(key) else {
            throw ConfigError(.forbidden, "\(key) is reserved: pairings, devices, identity and policy are not config",
                              hint: "policies are set with `speakbridge config policy`; devices with `speakbridge devices`")
        }
    }

    /// What may leave this machine: every record (tombstones included) that is not local-only and not reserved,
    /// limited to `keys` when given, secrets only when `includeSecrets`.
    public func offer(keys: [String]?, includeSecrets: Bool) throws(ConfigError) -> [ConfigUpdate] {
        let wanted = keys.map(Set.init)
        var records: [ConfigRecord] = []
        for key in document.records.keys.sorted() {
            let record = document.records[key]!
            if let wanted, !wanted.contains(key) { continue }
            if document.localOnly.contains(key) || ConfigKey.isReserved(key) { continue }
            if record.isSecret && !includeSecrets { continue }
            records.append(record)
        }
        return try updates(for: records)
    }

    /// What `config accept` did.
    public struct Accepted: Sendable, Equatable {
        /// Keys whose pending change is now the value.
        public var applied: [String] = []
        /// Keys whose pending change a newer value superseded meanwhile (dropped).
        public var superseded: [String] = []
        /// Keys whose pending change came from a device that is no longer paired: not applied, left pending for
        /// `config reject` (changes an older version kept after the device was revoked).
        public var unpaired: [String] = []
    }

    /// `config accept [KEY…]`: per key, the newest pending change (several devices may each have offered one) is
    /// applied if it is still newer than the local value; the key's other pending changes, and one a newer value
    /// superseded meanwhile, are dropped. A change from a device `paired` says no longer is paired is never
    /// applied (revoking a stolen device must not leave what it planted one `accept` away) and stays pending.
    /// One commit for all.
    public mutating func acceptPending(_ keys: [String]?, paired: (DeviceID) -> Bool) throws(ConfigError) -> Accepted {
        var out = Accepted()
        for key in try selectPending(keys) {
            let offers = document.pending(of: key).sorted { Merge.incomingWins($0.record.version, over: $1.record.version) }
            var appliedKey = false, supersededKey = false, unpairedKey = false
            for p in offers {
                guard paired(p.from) else {
                    unpairedKey = true
                    continue
                }
                document.pending[p.id] = nil
                if Merge.incomingWins(p.record.version, over: document.records[key]?.version) {
                    document.records[key] = p.record
                    appliedKey = true
                } else {
                    supersededKey = true
                }
            }
            if appliedKey { out.applied.append(key) }
            if supersededKey && !appliedKey { out.superseded.append(key) }
            if unpairedKey { out.unpaired.append(key) }
        }
        return out
    }

    /// Drops every pending change `device` offered (it was revoked); returns how many.
    @discardableResult
    public mutating func dropPending(from device: DeviceID) -> Int {
        let before = document.pending.count
        document.pending = document.pending.filter { $0.value.from != device }
        return before - document.pending.count
    }

    /// `config reject [KEY…]`: drops the pending changes of those keys (from every device); returns the keys.
    public mutating func rejectPending(_ keys: [String]?) throws(ConfigError) -> [String] {
        let selected = Set(try selectPending(keys))
        document.pending = document.pending.filter { !selected.contains($0.key.key) }
        return selected.sorted()
    }

    /// The keys named (each must have a pending change), or every key with one; sorted, each once.
    func selectPending(_ keys: [String]?) throws(ConfigError) -> [String] {
        let waiting = Set(document.pending.keys.map(\.key))
        guard let keys, !keys.isEmpty else { return waiting.sorted() }
        for key in keys where !waiting.contains(key) {
            throw ConfigError(.local, "no pending change for \(ConfigKey.printable(key))",
                              hint: "see them with `speakbridge config pending`")
        }
        return Set(keys).sorted()
    }

    /// Shown value of a record: masked for secrets unless `reveal`.
    public func shown(_ record: ConfigRecord, reveal: Bool) throws(ConfigError) -> String {
        switch record.body {
        case .value(let v): return v.display
        case .deleted: return "(deleted)"
        case .secret(let ref):
            guard let s = try secret(ref) else { return "(secret missing)" }
            return reveal ? s : SecretMask.mask(s)
        }
    }
}
