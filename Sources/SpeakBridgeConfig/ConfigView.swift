import SpeakBridgeProtocol

/// What `ConfigMachine` may know about this installation's store when it decides: the share mode, which keys
/// could leave (names and whether secret, never values), the items staged for the peer, and whether the peer is
/// still paired. The shell builds one from a `ConfigTransaction` it read; values are fetched only for the keys the
/// machine decides to send (`ConfigMachine.Action.resolve`).
public struct ConfigView: Sendable, Equatable {
    public var share: ShareMode
    /// Keys that may leave this installation, sorted: set here (tombstones included), not local-only, not reserved.
    public var offerable: [String]
    /// The subset of `offerable` that is secret.
    public var secrets: Set<String>
    /// Keys with a record here (tombstones included) and the local-only marks: for checking what the user pushes.
    public var recorded: Set<String>
    public var localOnly: Set<String>
    /// Desktop: what its user staged for the peer (`config push --to`, `config pull --from`), in staging order.
    public var staged: [StagedOutbox.Item]
    /// Desktop: the peer is (still) a paired device. A device's view of its desktop is always paired.
    public var paired: Bool

    public init(share: ShareMode = .publicOnly, offerable: [String] = [], secrets: Set<String> = [],
                recorded: Set<String> = [], localOnly: Set<String> = [], staged: [StagedOutbox.Item] = [],
                paired: Bool = true) {
        self.share = share
        self.offerable = offerable
        self.secrets = secrets
        self.recorded = recorded
        self.localOnly = localOnly
        self.staged = staged
        self.paired = paired
    }

    /// The view of `tx` for exchanges with `peer`.
    public init(_ tx: ConfigTransaction, peer: DeviceID, paired: Bool = true) {
        let doc = tx.document
        let offerable = doc.records.keys.filter { !doc.localOnly.contains($0) && !ConfigKey.isReserved($0) }.sorted()
        self.init(share: doc.policy.share, offerable: offerable,
                  secrets: Set(offerable.filter { doc.records[$0]?.isSecret == true }),
                  recorded: Set(doc.records.keys), localOnly: doc.localOnly,
                  staged: tx.outbox.items.filter { $0.device == peer }, paired: paired)
    }

    /// The keys the user asks to push (nil: all): each must be a valid key set here and not local-only.
    /// Used before a push leaves a device and before the desktop stages one, so both refuse alike.
    public func checkPush(_ keys: [String]?) throws(ConfigError) {
        for key in keys ?? [] {
            try ConfigKey.validate(key)
            guard recorded.contains(key) else {
                throw ConfigError(.local, "\(key) is not set here", hint: "list the keys with `speakbridge config list`")
            }
            guard !localOnly.contains(key) else {
                throw ConfigError(.local, "\(key) is local-only: it never leaves this machine",
                                  hint: "`speakbridge config local-only \(key) --off` to share it")
            }
        }
    }

    /// What a push of `keys` (nil: all) sends: every named key that may leave, secrets included (the user named it).
    public func pushKeys(_ keys: [String]?) -> [String] {
        guard let keys else { return offerable }
        let wanted = Set(keys)
        return offerable.filter(wanted.contains)
    }

    /// The share decision for a pull of `keys` (nil: everything shared): nil when the share mode is `none` (the
    /// pull is refused), else the keys to send and how many secrets the mode left out (`public` sends no secret).
    public func pullAnswer(_ keys: [String]?) -> (keys: [String], withheld: Int)? {
        guard share != .none else { return nil }
        let asked = pushKeys(keys)
        guard share == .publicOnly else { return (asked, 0) }
        let sent = asked.filter { !secrets.contains($0) }
        return (sent, asked.count - sent.count)
    }
}
