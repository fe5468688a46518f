import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

/// The desktop's side of config transfer, behind the daemon's `PeerConfigHandler` seam: one `ConfigMachine`
/// (role desktop) per paired device, carried out by `ConfigShell`, its notes written to the log.
///
/// Every call re-reads the store and the paired devices from disk (under the store's lock), so the CLI may change
/// them while the daemon runs, and a device revoked a moment ago is refused here too. Calls block on files and the
/// keyring (D-Bus): the daemon makes them off its network thread. Calls are serialized (one lock for all devices).
public final class ConfigPeerHandler: PeerConfigHandler {
    let store: ConfigStore
    let home: Home
    let machines = Locked<[DeviceID: ConfigMachine]>([:])
    /// Calls whose notes are logged: at most `logBurst` per device in 10 s (`LogBudget`).
    let logBudget = Locked(LogBudget<DeviceID>(interval: 10, burst: ConfigPeerHandler.logBurst))
    public static let logBurst = 10

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
        let shell = ConfigShell(store: store, peer: device, peerName: name)
        let paired = isPaired(device)
        let output = machines.withLock { all -> ConfigShell.Output in
            var machine = all[device] ?? ConfigMachine(role: .desktop)
            let output = shell.received(&machine, type: type, body: body, paired: paired)
            all[device] = paired ? machine : nil
            return output
        }
        let who = "\"\(shell.peerName)\" (\(device))"
        // A device decides how many config messages it sends, and most notes are a line each: at most `logBurst`
        // calls' notes per device in 10 s are logged, the next logged call says how many were not.
        let now = Double(ThreadCondition.monotonicNanoseconds) / 1e9
        if !output.notes.isEmpty, let hidden = logBudget.withLock({ $0.admit(device, now: now) }) {
            if hidden > 0 { Console.info("config: \(hidden) more config call(s) of \(who) in the 10 s before, not logged") }
            for note in output.notes { Self.log(note, from: who, device: device) }
        }
        return output.messages.map(ConfigWire.message)
    }

    /// A revoked device: forgets its batches in progress, everything staged for it (so nothing staged reaches it if
    /// it is ever paired again) and every change it offered that waits for consent, with their secrets
    /// (`ConfigStore.forget(device:)`): a stolen device's key revoked leaves nothing of it for `config accept`.
    public func deviceRevoked(_ device: DeviceID) {
        machines.withLock { _ = $0.removeValue(forKey: device) }
        do {
            let dropped = try store.forget(device: device)
            if dropped.staged > 0 { Console.info("config: dropped \(dropped.staged) push/pull item(s) staged for the revoked device \(device)") }
            if dropped.pending > 0 { Console.info("config: dropped \(dropped.pending) pending change(s) from the revoked device \(device)") }
        } catch {
            Console.error("config: cannot drop the config of the revoked device \(device): \(error.message)", hint: error.hint)
        }
    }

    func isPaired(_ device: DeviceID) -> Bool {
        guard let peers = try? PeerStore(home: home) else { return false }
        return peers.all.contains { $0.id == device && $0.role == .client }
    }

    static func log(_ note: ConfigNote, from who: String, device: DeviceID) {
        switch note {
        case let .answeredPull(_, sent, withheld):
            if withheld > 0 {
                Console.info("config: sending \(sent) key(s) to \(who); withheld \(withheld) secret(s) (share mode public)")
                Console.info("hint: send one with `speakbridge config push --to \(device) KEY`, or let paired devices pull secrets with `speakbridge config share all`")
            } else {
                Console.info("config: sending \(sent) key(s) to \(who)")
            }
        case .refusedPull:
            Console.info("config: \(who) asked for config; refused (share mode none)")
        case let .unrequested(batch, keys):
            Console.warning("config: \(who) answered the staged pull \(batch) with \(keys.count) key(s) it did not ask for; "
                            + "refused them (nothing of them stored): \(PeerText.escape(keys.joined(separator: ", "), limit: 512))")
        case let .received(_, r, withheld):
            if withheld > 0 { Console.info("config: \(who) withheld \(withheld) secret(s) (its share mode is public)") }
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
        case .delivered(let r):
            Console.debug("config: \(who) answered \(r.batch): \(r.status.rawValue)")
        case .stagedDelivered(let r):
            Console.info("config: staged push delivered to \(who): \(r.status.rawValue) (applied \(r.appliedCount), pending \(r.pendingCount))")
        case let .stagedDropped(id, reason):
            Console.warning("config: dropped the staged item \(id) for \(who): \(reason)")
        case let .rejected(type, error):
            Console.warning("config: rejected \(type) from \(who): \(error.code.rawValue): \(error.message)")
        case let .peerError(_, code, message):
            Console.warning("config: \(who) reported \(code): \(message)")
        case .localFailure(let error):
            Console.error("config: \(error.message)", hint: error.hint)
        case .notPaired(let type):
            Console.warning("config: refused a \(PeerText.escape(type, limit: 32)) from \(who): not a paired device")
        }
    }
}
