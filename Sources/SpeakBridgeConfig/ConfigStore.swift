#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

/// One installation's config: `config/settings.json`, the secret backend, and `state/config-outbox.json`.
/// Without an explicit backend the store picks one with `SecretBackends.choose` (Secret Service or file), so the
/// CLI, the client and the daemon all choose the same way.
///
/// Every read and every change takes an exclusive `flock` on `config/settings.lock`, so the CLI and the daemon
/// (which reads the files afresh for every exchange) never see or write half of a change. A change is one
/// `update { … }`: the closure edits a copy; nothing is written when it throws; otherwise new secrets are stored,
/// then `settings.json` is replaced atomically (`FileIO.atomicWrite`: temp file, fsync, rename), which is the
/// commit point of the whole change — a batch from a peer is applied entirely or not at all.
public final class ConfigStore: Sendable {
    public let home: Home
    /// This installation's device ID: the writer part of every version it stamps.
    public let device: DeviceID
    public let secrets: any SecretBackend
    /// Wall clock in Unix milliseconds (injectable for tests).
    public let now: @Sendable () -> UInt64

    var documentPath: String { home.settingsFile }
    var outboxPath: String { home.state + "/config-outbox.json" }
    var lockPath: String { home.config + "/settings.lock" }

    public init(home: Home, device: DeviceID, secrets: (any SecretBackend)? = nil,
                now: @escaping @Sendable () -> UInt64 = ConfigStore.wallClock) throws(ConfigError) {
        do { try home.prepare() } catch { throw .local(error.description, hint: error.hint) }
        self.home = home
        self.device = device
        if let secrets { self.secrets = secrets } else { self.secrets = try SecretBackends.choose(for: home) }
        self.now = now
    }

    public static let wallClock: @Sendable () -> UInt64 = { UInt64(max(0, Date().timeIntervalSince1970 * 1_000)) }

    /// A consistent snapshot (document and outbox read under the lock).
    public func read() throws(ConfigError) -> ConfigTransaction {
        try withLock { () throws(ConfigError) -> ConfigTransaction in try load() }
    }

    /// Runs `body` on a copy of the store and commits it (see the type's comment).
    @discardableResult
    public func update<T>(_ body: (inout ConfigTransaction) throws(ConfigError) -> T) throws(ConfigError) -> T {
        try withLock { () throws(ConfigError) -> T in
            var tx = try load()
            let before = tx
            let result = try body(&tx)
            try commit(tx, before: before)
            return result
        }
    }

    /// What `forget(device:)` dropped.
    public struct Forgotten: Sendable, Equatable {
        /// Push/pull items staged for the device.
        public var staged = 0
        /// Changes the device offered that waited for consent.
        public var pending = 0
    }

    /// A revoked device: removes everything staged for it and every pending change it offered, in one commit.
    /// The secrets of those pending changes leave the secret backend with that commit (`prune`), so neither a
    /// later `config accept` nor anything reading the backend finds what a since revoked (perhaps stolen) device
    /// planted.
    @discardableResult
    public func forget(device: DeviceID) throws(ConfigError) -> Forgotten {
        try update { tx throws(ConfigError) -> Forgotten in
            var dropped = Forgotten()
            let staged = tx.outbox.items.count
            tx.outbox.items.removeAll { $0.device == device }
            dropped.staged = staged - tx.outbox.items.count
            dropped.pending = tx.dropPending(from: device)
            return dropped
        }
    }

    func load() throws(ConfigError) -> ConfigTransaction {
        let doc: ConfigDocument
        let outbox: StagedOutbox
        do {
            doc = try FileIO.read(documentPath).map { b throws(ConfigError) in try ConfigDocument.decode(b) } ?? ConfigDocument()
            outbox = try FileIO.read(outboxPath).map { b throws(ConfigError) in try StagedOutbox.decode(b) } ?? StagedOutbox()
        } catch let error as ConfigError {
            throw error
        } catch let error as StoreError {
            throw .local(error.description, hint: error.hint)
        } catch {
            throw .local("\(error)")
        }
        return ConfigTransaction(document: doc, outbox: outbox, backend: secrets, device: device, now: now())
    }

    /// Secrets first, then the document (the commit point), then the outbox. Once the document is replaced the
    /// change has happened, so what fails after it is a warning, not an error that would say nothing was applied
    /// (a peer would be told `internal`): an outbox not updated leaves a staged item that is answered again
    /// (`unchanged`), secrets not pruned are pruned by the next commit.
    func commit(_ tx: ConfigTransaction, before: ConfigTransaction) throws(ConfigError) {
        try secrets.put(tx.newSecrets)
        let documentChanged = tx.document != before.document
        if documentChanged {
            do { try FileIO.atomicWrite(documentPath, tx.document.encoded()) } catch {
                throw .local(error.description, hint: error.hint)
            }
        }
        if tx.outbox != before.outbox {
            do { try FileIO.atomicWrite(outboxPath, tx.outbox.encoded()) } catch {
                guard documentChanged else { throw .local(error.description, hint: error.hint) }
                Console.warning("config: the change is stored, but \(outboxPath) could not be updated (\(error.description)): a staged push or pull may be sent again")
            }
        }
        if documentChanged || !tx.newSecrets.isEmpty {
            do { try secrets.prune(keeping: tx.document.referencedSecrets) } catch {
                guard documentChanged else { throw error }
                Console.warning("config: the change is stored, but secrets it no longer uses could not be removed (\(error.message)); the next change retries")
            }
        }
    }

    func withLock<T>(_ body: () throws(ConfigError) -> T) throws(ConfigError) -> T {
        let fd: Int32
        do { fd = try FileIO.openAppend(lockPath) } catch { throw .local(error.description, hint: error.hint) }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw .local("cannot lock \(lockPath): \(String(cString: strerror(errno)))") }
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }
}

/// A copy of the store being read or changed inside `ConfigStore.update`.
public struct ConfigTransaction: Sendable {
    public var document: ConfigDocument
    public var outbox: StagedOutbox
    /// Secrets written by this change (reference → value), stored before the document is replaced.
    var newSecrets: [String: String] = [:]
    let backend: any SecretBackend
    public let device: DeviceID
    /// Wall clock (Unix ms) when the change began.
    public let now: UInt64

    init(document: ConfigDocument, outbox: StagedOutbox, backend: any SecretBackend, device: DeviceID, now: UInt64) {
        self.document = document
        self.outbox = outbox
        self.backend = backend
        self.device = device
        self.now = now
    }

    /// The value of a secret reference.
    public func secret(_ ref: String) throws(ConfigError) -> String? {
        if let v = newSecrets[ref] { return v }
        return try backend.value(ref: ref)
    }

    /// Stores a secret value under a new random reference (written at commit).
    mutating func putSecret(_ value: String) -> String {
        let ref = Hex.encode(SecureRandom.bytes(16))
        newSecrets[ref] = value
        return ref
    }

    /// A new version for a local write.
    mutating func tick() -> HLCTimestamp { document.clock.tick(now: now, device: device) }

    /// A record's value as it travels (secrets resolved).
    public func update(for record: ConfigRecord) throws(ConfigError) -> ConfigUpdate {
        try updates(for: [record])[0]
    }

    /// Records' values as they travel, in order, their secrets looked up together (`SecretBackend.values`: the
    /// secrets file read once for all of them).
    public func updates(for records: [ConfigRecord]) throws(ConfigError) -> [ConfigUpdate] {
        var refs: [String] = []
        for record in records { if case .secret(let ref) = record.body, newSecrets[ref] == nil { refs.append(ref) } }
        let stored = try backend.values(refs: refs)
        var out: [ConfigUpdate] = []
        out.reserveCapacity(records.count)
        for record in records { out.append(try update(for: record, stored: stored)) }
        return out
    }

    private func update(for record: ConfigRecord, stored: [String: String]) throws(ConfigError) -> ConfigUpdate {
        switch record.body {
        case .value(let v): return ConfigUpdate(key: record.key, version: record.version, body: .value(v))
        case .deleted: return ConfigUpdate(key: record.key, version: record.version, body: .deleted)
        case .secret(let ref):
            guard let value = newSecrets[ref] ?? stored[ref] else {
                throw .local("the secret value of \(record.key) is missing from \(backend.summary)",
                             hint: "set it again with `speakbridge config set \(record.key) VALUE --secret`, or run with "
                                 + "the secret backend it was stored in (same session bus, same SPEAKBRIDGE_SECRETS)")
            }
            return ConfigUpdate(key: record.key, version: record.version, body: .secret(value))
        }
    }
}
