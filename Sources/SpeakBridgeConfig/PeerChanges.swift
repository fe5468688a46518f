import SpeakBridgeProtocol

/// Applying a batch a peer sent, all or nothing.
///
/// Order: (1) every entry is checked — a trust key anywhere, a version too far in the future, or a value out of
/// bounds (`ConfigValue.validate`) rejects the whole batch and nothing changes; (2) the policy for the sender decides: `deny` stores nothing, `ask` holds newer
/// entries as pending (except the keys `acceptOverride` covers: those apply), one per (key, sender): a sender
/// replaces only its own pending change of a key, never another device's; `accept` applies them; (3) keys
/// outside `only` (an answer to a pull that did not ask for them) are left out: not stored, not held, not listed
/// (the caller reports them); (4) per key, last writer wins (`Merge`); local-only keys are skipped; (5) the clock
/// observes the version of every entry not left out by (3), so later local writes win over what was just seen;
/// (6) bounds: at most `maxKeys` records, and what the sender has pending here within its own quota
/// (`maxPendingPerDevice`, `maxPendingBytesPerDevice`), else the whole batch is refused (`too-large`).
extension ConfigTransaction {
    /// Most records (keys with a value or a deletion) one installation keeps; a batch that would exceed it is
    /// refused. Pending changes do not count here: each device has its own quota for them (below), so one device
    /// cannot fill the store for the others.
    public static let maxKeys = 2_048
    /// Most changes held for consent from one device; a batch that would exceed it is refused (`too-large`).
    public static let maxPendingPerDevice = 256
    /// Most bytes (`PendingRecord.bytes`: keys and values) held for consent from one device.
    public static let maxPendingBytesPerDevice = 256 << 10

    /// - Parameters:
    ///   - acceptOverride: keys applied under the policy `ask` without review (`--accept`); never under `deny`.
    ///   - only: the keys this batch may bring (`KeyScope.every` unless it answers a pull that named keys).
    public mutating func apply(_ updates: [ConfigUpdate], from device: DeviceID, name: String,
                               acceptOverride: KeyScope = .nothing, only: KeyScope = .every) throws(ConfigError) -> ConfigResult {
        for u in updates {
            try ConfigKey.validate(u.key)
            guard !ConfigKey.isReserved(u.key) else {
                throw ConfigError(.forbidden, "\(u.key) is a trust key (pairings, devices, identity, policy): never accepted from a peer; nothing applied")
            }
            try HybridLogicalClock.check(u.version, now: now, key: u.key)
            // Decoding checked these already (`ConfigWire.entry`); again for updates built in code.
            switch u.body {
            case .value(let v): try v.validate(key: u.key)
            case .secret(let s): try ConfigValue.string(s).validate(key: u.key)
            case .deleted: break
            }
        }
        let policy = document.policy.policy(for: device)
        if policy == .deny && !updates.isEmpty { return ConfigResult(batch: "", status: .denied) }
        var result = ConfigResult(batch: "", status: .unchanged)
        let pendingKeys = Set(document.pending.keys.map(\.key))
        var heldNew = false
        for u in updates where only.contains(u.key) {
            document.clock.observe(u.version, now: now)
            if document.localOnly.contains(u.key) {
                result.skipped.append(u.key)
                continue
            }
            let local = document.records[u.key]
            guard Merge.incomingWins(u.version, over: local?.version) else {
                result.unchanged.append(u.key)
                continue
            }
            if policy == .accept || acceptOverride.contains(u.key) {
                document.records[u.key] = record(u, stickySecret: local?.isSecret ?? false)
                if pendingKeys.contains(u.key) {  // pending changes this one supersedes, from any device, go
                    document.pending = document.pending.filter {
                        $0.key.key != u.key || Merge.incomingWins($0.value.record.version, over: u.version)
                    }
                }
                result.applied.append(u.key)
            } else {
                // Only this device's own pending change of the key can be replaced (by a newer one).
                let id = PendingRecord.ID(key: u.key, from: device)
                if let p = document.pending[id], !Merge.incomingWins(u.version, over: p.record.version) {
                    result.pending.append(u.key)  // the same or a newer change already waits
                    continue
                }
                document.pending[id] = PendingRecord(record: record(u, stickySecret: local?.isSecret ?? false),
                                                     from: device, fromName: name, received: Int64(now / 1_000),
                                                     bytes: PendingRecord.bytes(of: u))
                heldNew = true
                result.pending.append(u.key)
            }
        }
        guard document.records.count <= Self.maxKeys else {
            throw ConfigError(.tooLarge, "the batch would take this installation over \(Self.maxKeys) keys; nothing applied")
        }
        if heldNew {
            var count = 0, bytes = 0
            for p in document.pending.values where p.from == device {
                count += 1
                bytes += p.bytes
            }
            guard count <= Self.maxPendingPerDevice, bytes <= Self.maxPendingBytesPerDevice else {
                throw ConfigError(.tooLarge, "the batch would hold more than \(Self.maxPendingPerDevice) changes or "
                                  + "\(Self.maxPendingBytesPerDevice >> 10) KiB from this device for consent; nothing applied")
            }
        }
        result.status = !result.applied.isEmpty ? .applied : !result.pending.isEmpty ? .pending : .unchanged
        return result
    }

    /// A received update as a record. A key that is secret here stays secret when a peer sends a string for it.
    mutating func record(_ u: ConfigUpdate, stickySecret: Bool) -> ConfigRecord {
        switch u.body {
        case .deleted:
            return ConfigRecord(key: u.key, version: u.version, body: .deleted)
        case .secret(let s):
            return ConfigRecord(key: u.key, version: u.version, body: .secret(ref: putSecret(s)))
        case .value(.string(let s)) where stickySecret:
            return ConfigRecord(key: u.key, version: u.version, body: .secret(ref: putSecret(s)))
        case .value(let v):
            return ConfigRecord(key: u.key, version: u.version, body: .value(v))
        }
    }
}
