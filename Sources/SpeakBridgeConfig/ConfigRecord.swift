import SpeakBridgeProtocol

/// One key as this installation stores it. A secret's value is not here but in the secret backend, under `ref`.
public struct ConfigRecord: Sendable, Equatable {
    public enum Body: Sendable, Equatable {
        case value(ConfigValue)
        /// A secret string, kept by the `SecretBackend` under this opaque reference.
        case secret(ref: String)
        /// A tombstone: the key was unset. Tombstones are kept and travel like values, so a deletion syncs.
        case deleted
    }

    public var key: String
    public var version: HLCTimestamp
    public var body: Body

    public init(key: String, version: HLCTimestamp, body: Body) {
        self.key = key
        self.version = version
        self.body = body
    }

    public var isSecret: Bool { if case .secret = body { return true }; return false }
    public var isDeleted: Bool { body == .deleted }
    var secretRef: String? { if case .secret(let ref) = body { return ref }; return nil }
}

/// One key as it travels between devices (and into `apply`): a secret carries its value.
public struct ConfigUpdate: Sendable, Equatable {
    public enum Body: Sendable, Equatable {
        case value(ConfigValue)
        case secret(String)
        case deleted
    }

    public var key: String
    public var version: HLCTimestamp
    public var body: Body

    public init(key: String, version: HLCTimestamp, body: Body) {
        self.key = key
        self.version = version
        self.body = body
    }
}

/// A change a peer offered that waits for the user's consent (policy `ask`).
public struct PendingRecord: Sendable, Equatable, Identifiable {
    /// One device's change of one key. Changes of the same key from different devices wait side by side: a device
    /// can replace only its own pending change (with a newer one), never another device's.
    public struct ID: Sendable, Hashable, Comparable {
        public var key: String
        public var from: DeviceID

        public init(key: String, from: DeviceID) {
            self.key = key
            self.from = from
        }

        public static func < (a: ID, b: ID) -> Bool {
            a.key != b.key ? a.key < b.key : a.from.description < b.from.description
        }
    }

    public var id: ID { ID(key: record.key, from: from) }

    /// What this change counts against its device's pending quota (`ConfigTransaction.maxPendingBytesPerDevice`):
    /// the key's bytes plus the value's (a string's or secret's UTF-8 bytes, 8 for a number or boolean, 0 for a
    /// deletion).
    public var bytes: Int

    public var record: ConfigRecord
    public var from: DeviceID
    public var fromName: String
    /// Unix seconds when it arrived.
    public var received: Int64

    /// `bytes` nil: measured from `record`; a secret, whose value the record does not hold, then counts as the
    /// largest a value may be (settings.json written before the quota did not store `bytes`).
    public init(record: ConfigRecord, from: DeviceID, fromName: String, received: Int64, bytes: Int? = nil) {
        self.record = record
        self.from = from
        self.fromName = fromName
        self.received = received
        self.bytes = bytes ?? Self.bytes(key: record.key, body: record.body)
    }

    static func bytes(key: String, body: ConfigRecord.Body) -> Int {
        switch body {
        case .value(let v): return key.utf8.count + v.bytes
        case .secret: return key.utf8.count + ConfigValue.maxStringBytes
        case .deleted: return key.utf8.count
        }
    }

    /// `bytes` of a change as it arrived (a secret's actual length).
    static func bytes(of u: ConfigUpdate) -> Int {
        switch u.body {
        case .value(let v): return u.key.utf8.count + v.bytes
        case .secret(let s): return u.key.utf8.count + s.utf8.count
        case .deleted: return u.key.utf8.count
        }
    }
}

/// Per-key last-writer-wins: the higher version wins, whatever it carries (a value or a tombstone).
/// Equal versions are the same write. Nothing else is consulted, so every device that has seen the same
/// writes holds the same winner, in whatever order the writes arrived.
public enum Merge {
    public static func incomingWins(_ incoming: HLCTimestamp, over local: HLCTimestamp?) -> Bool {
        guard let local else { return true }
        return local < incoming
    }
}

/// What applying one batch did; sent back to the peer as `config-result`.
public struct ConfigResult: Sendable, Equatable {
    public enum Status: String, Sendable {
        /// At least one key was applied.
        case applied
        /// Nothing applied, at least one key is held for consent (policy `ask`).
        case pending
        /// Nothing was newer than what the receiver has (or the batch was empty).
        case unchanged
        /// The receiver's policy for the sender is `deny`: nothing was stored.
        case denied
    }

    public var batch: String
    public var status: Status
    public var applied: [String]
    public var pending: [String]
    public var unchanged: [String]
    /// Keys marked local-only on the receiver: ignored there.
    public var skipped: [String]
    /// How many keys each list left out so that the result fits one message (`ConfigWire.resultBudget`: 1,024
    /// keys of 128 bytes would not); zero when every key is listed. The counts below add them.
    public var omitted = Omitted()

    public struct Omitted: Sendable, Equatable {
        public var applied = 0, pending = 0, unchanged = 0, skipped = 0
        public init(applied: Int = 0, pending: Int = 0, unchanged: Int = 0, skipped: Int = 0) {
            (self.applied, self.pending, self.unchanged, self.skipped) = (applied, pending, unchanged, skipped)
        }
        public var total: Int { applied + pending + unchanged + skipped }
    }

    /// Each list's length with the keys it left out: what a report counts.
    public var appliedCount: Int { applied.count + omitted.applied }
    public var pendingCount: Int { pending.count + omitted.pending }
    public var unchangedCount: Int { unchanged.count + omitted.unchanged }
    public var skippedCount: Int { skipped.count + omitted.skipped }

    public init(batch: String, status: Status, applied: [String] = [], pending: [String] = [],
                unchanged: [String] = [], skipped: [String] = []) {
        self.batch = batch
        self.status = status
        self.applied = applied
        self.pending = pending
        self.unchanged = unchanged
        self.skipped = skipped
    }
}
