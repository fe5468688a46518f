import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

/// The desktop's side of config transfer, behind the daemon's `PeerConfigHandler` seam.
///
/// Flow (the device always leads; the desktop cannot dial it):
/// 1. The device sends `config-pull` and/or a `config-offer` batch.
/// 2. Before the message that completes the device's request, the desktop sends what the user staged for this
///    device (`config push --to` → an offer with origin `staged`; `config pull --from` → a `config-pull`), so the
///    device has seen every request before it considers the exchange finished.
/// 3. A pull is answered with an offer (same batch ID) of what the share mode allows; a complete offer is applied
///    under the policy for that device and answered with `config-result`; bad input with `config-error`.
/// 4. The device's `config-result` (or its offer answering a staged pull) removes the staged item.
///
/// Every call re-reads the store and the paired devices from disk (under the store's lock), so the CLI may change
/// them while the daemon runs, and a device revoked a moment ago is refused here too.
public final class ConfigPeerHandler: PeerConfigHandler, @unchecked Sendable {
    let store: ConfigStore
    let home: Home
    let lock = NSLock()
    // Guarded by `lock`.
    var assemblers: [DeviceID: BatchAssembler] = [:]
    /// Staged items sent and not yet answered: batch ID → when it was sent (Unix ms). Resent after `resendAfter`.
    var inFlight: [String: UInt64] = [:]
    static let resendAfterMillis: UInt64 = 30_000

    public init(home: Home, store: ConfigStore? = nil) throws(ConfigError) {
        self.home = home
        if let store {
            self.store = store
        } else {
            let identity: Identity
            do { identity = try Identity.loadOrCreate(home) } catch { throw .local(error.description, hint: error.hint) }
            self.store = try ConfigStore(home: home, device: identity.deviceID)
        }
    }

    /// Nothing is sent unasked: a plain `send` client (or another app) would not understand config messages.
    /// Staged items go out when the device starts a config exchange.
    public func sessionOpened(device: DeviceID, name: String) -> [Message] { [] }

    public func handle(from device: DeviceID, name: String, type: String, body: JSONValue) -> [Message] {
        lock.withLock { handleLocked(from: device, name: ConfigText.clean(name, limit: 64), type: type, body: body) }
            .map(ConfigWire.message)
    }

    func handleLocked(from device: DeviceID, name: String, type: String, body: JSONValue) -> [ConfigMessage] {
        let who = "\"\(name)\" (\(device))"
        let batch = body["batch"]?.stringValue.flatMap { MessageCodec.isValidSessionID($0) ? $0 : nil }
        guard isPaired(device) else {
            Console.warning("config: refused a \(type) from \(who): not a paired device")
            return [.error(batch: batch, code: ConfigError.Code.revoked.rawValue, message: "this device is not paired with this desktop")]
        }
        do {
            switch try ConfigWire.decode(type: type, body: body) {
            case let .pull(batch, keys):
                var out = try staged(for: device)
                let share = try store.read().document.policy.share
                if share == .none {
                    Console.info("config: \(who) asked for config; refused (share mode none)")
                    out.append(.error(batch: batch, code: "denied", message: "this desktop shares no config (share mode none)"))
                    return out
                }
                let tx = try store.read()
                let updates = try tx.offer(keys: keys, includeSecrets: share == .all)
                let withheld = share == .all ? 0 : try tx.offer(keys: keys, includeSecrets: true).count - updates.count
                if withheld > 0 {
                    Console.info("config: sending \(updates.count) key(s) to \(who); withheld \(withheld) secret(s) (share mode public)")
                    Console.info("hint: send one with `speakbridge config push --to \(device) KEY`, or let paired devices pull secrets with `speakbridge config share all`")
                } else {
                    Console.info("config: sending \(updates.count) key(s) to \(who)")
                }
                return try out + ConfigWire.offer(batch: batch, origin: "reply", updates: updates, withheld: withheld)
            case .offer(let part):
                guard let (_, entries, withheld) = try assemblers[device, default: BatchAssembler()].add(part, now: store.now())
                else { return [] }
                if withheld > 0 { Console.info("config: \(who) withheld \(withheld) secret(s) (its share mode is public)") }
                var out = try staged(for: device)
                var result = try store.update { tx throws(ConfigError) -> ConfigResult in
                    let r = try tx.apply(entries, from: device, name: name)
                    tx.outbox.items.removeAll { $0.id == part.batch && $0.kind == .pull && $0.device == device }
                    return r
                }
                inFlight[part.batch] = nil
                result.batch = part.batch
                log(result, from: who)
                out.append(.result(result))
                return out
            case .result(let r):
                if inFlight.removeValue(forKey: r.batch) != nil {
                    try clearStaged(r.batch)
                    Console.info("config: staged push delivered to \(who): \(r.status.rawValue) (applied \(r.applied.count), pending \(r.pending.count))")
                }
                return []
            case let .error(batch, code, text):
                Console.warning("config: \(who) reported \(code): \(text)")
                if let batch, inFlight.removeValue(forKey: batch) != nil {
                    try clearStaged(batch)
                    Console.warning("config: dropped the staged item \(batch) for \(who)")
                }
                return []
            }
        } catch {
            if error.code == .local {
                Console.error("config: \(error.message)", hint: error.hint)
                return [.error(batch: batch, code: "internal", message: "the desktop could not complete this (see its log)")]
            }
            Console.warning("config: rejected \(type) from \(who): \(error.code.rawValue): \(error.message)")
            return [.error(batch: batch, code: error.code.rawValue, message: error.message)]
        }
    }

    /// Staged items for `device` that are not already on their way.
    func staged(for device: DeviceID) throws(ConfigError) -> [ConfigMessage] {
        let now = store.now()
        let tx = try store.read()
        var out: [ConfigMessage] = []
        for item in tx.outbox.items where item.device == device {
            if let sent = inFlight[item.id], now < sent + Self.resendAfterMillis { continue }
            switch item.kind {
            case .pull:
                out.append(.pull(batch: item.id, keys: item.keys))
            case .push:
                let updates = try tx.offer(keys: item.keys, includeSecrets: true)
                do {
                    out += try ConfigWire.offer(batch: item.id, origin: "staged", updates: updates)
                } catch {
                    Console.warning("config: dropped the staged push \(item.id): \(error.message)")
                    try clearStaged(item.id)
                    continue
                }
            }
            inFlight[item.id] = now
        }
        return out
    }

    func clearStaged(_ id: String) throws(ConfigError) {
        try store.update { tx throws(ConfigError) in tx.outbox.items.removeAll { $0.id == id } }
    }

    func isPaired(_ device: DeviceID) -> Bool {
        guard let peers = try? PeerStore(home: home) else { return false }
        return peers.all.contains { $0.id == device && $0.role == .client }
    }

    func log(_ r: ConfigResult, from who: String) {
        switch r.status {
        case .applied:
            Console.info("config: applied \(r.applied.count) key(s) from \(who): \(r.applied.joined(separator: ", "))"
                         + (r.pending.isEmpty ? "" : "; \(r.pending.count) pending"))
        case .pending:
            Console.info("config: holding \(r.pending.count) change(s) from \(who) for consent: run `speakbridge config pending`")
        case .unchanged:
            Console.info("config: nothing newer from \(who)")
        case .denied:
            Console.info("config: denied a batch from \(who) (policy deny)")
        }
    }
}
