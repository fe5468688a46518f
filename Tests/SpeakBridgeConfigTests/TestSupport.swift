#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeConfig
import SpeakBridgeProtocol
import SpeakBridgeStore

/// A wall clock the test moves by hand (Unix milliseconds).
final class ManualClock: @unchecked Sendable {
    let lock = NSLock()
    var value: UInt64

    init(_ ms: UInt64 = 1_700_000_000_000) { value = ms }

    var ms: UInt64 {
        get { lock.withLock { value } }
        set { lock.withLock { value = newValue } }
    }

    func advance(_ delta: UInt64) { ms += delta }
}

/// A device ID made from one repeated byte (no crypto needed in these tests).
func device(_ byte: UInt8) -> DeviceID { DeviceID(publicKeyDigest: [UInt8](repeating: byte, count: 32)) }

/// A store in a fresh temporary home.
struct TestStore {
    let root: String
    let home: Home
    let clock: ManualClock
    let store: ConfigStore
    let id: DeviceID

    init(_ label: String, device id: DeviceID, clock: ManualClock = ManualClock()) throws {
        root = "/tmp/sbc-\(label)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        home = Home(config: root + "/config", state: root + "/state", runtime: root + "/run")
        self.clock = clock
        self.id = id
        // Never the developer's keyring: these tests are about the store, not the backend.
        store = try ConfigStore(home: home, device: id, secrets: FileSecretBackend(path: home.config + "/secrets.json"),
                                now: { clock.ms })
    }

    func set(_ key: String, _ value: ConfigValue, secret: Bool? = nil) throws {
        try store.update { tx throws(ConfigError) in _ = try tx.set(key, value, secret: secret) }
    }

    func apply(_ updates: [ConfigUpdate], from: DeviceID, acceptOverride: Bool = false) throws -> ConfigResult {
        try store.update { tx throws(ConfigError) -> ConfigResult in
            try tx.apply(updates, from: from, name: "peer", acceptOverride: acceptOverride ? .every : .nothing)
        }
    }

    func offer(_ keys: [String]? = nil, secrets: Bool = true) throws -> [ConfigUpdate] {
        try store.read().offer(keys: keys, includeSecrets: secrets)
    }

    func policy(_ p: ConsentPolicy, for d: DeviceID? = nil) throws {
        try store.update { tx throws(ConfigError) in
            if let d { tx.document.policy.devices[d] = p } else { tx.document.policy.defaultPolicy = p }
        }
    }

    /// The visible value of a key (secrets revealed), nil when unset or deleted.
    func value(_ key: String) throws -> String? {
        let tx = try store.read()
        guard let r = tx.document.records[key], !r.isDeleted else { return nil }
        return try tx.shown(r, reveal: true)
    }

    var fileBytes: [UInt8] { (try? FileIO.read(home.settingsFile)) .flatMap { $0 } ?? [] }

    func remove() { try? FileManager.default.removeItem(atPath: root) }
}

func update(_ key: String, _ value: String, ms: UInt64, counter: UInt16 = 0, by d: DeviceID) -> ConfigUpdate {
    ConfigUpdate(key: key, version: HLCTimestamp(ms: ms, counter: counter, device: d), body: .value(.string(value)))
}

/// The code of the ConfigError `body` throws; nil when it does not throw.
func errorCode(_ body: () throws -> Void) -> ConfigError.Code? {
    do {
        try body()
        return nil
    } catch {
        return (error as? ConfigError)?.code ?? .local
    }
}
