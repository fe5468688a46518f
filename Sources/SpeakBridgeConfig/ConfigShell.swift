import SpeakBridgeProtocol
import SpeakBridgeSupport

/// Carries out a `ConfigMachine`'s actions for one peer against a `ConfigStore`: the only config-transfer code
/// that reads or writes the store (and through it the secret backend: keyring or 0600 file). Used alike by the
/// desktop (`ConfigPeerHandler`) and a device (`ConfigExchange`); synchronous, so callers run it off any network
/// thread.
///
/// Flow of one call: read a snapshot of the store → build the `ConfigView` → feed the event → carry out the actions
/// in order, depth first: an action whose result is another event (`resolve` → `resolved`, `apply` → `applied`)
/// has that event's actions carried out before the next action, so messages leave in the order the machine chose.
///
/// Secret values are read from the snapshot only for the keys the machine decided to send, live in the returned
/// `ConfigMessage`s until the caller encodes them, and are not kept after the call.
public struct ConfigShell: Sendable {
    public let store: ConfigStore
    public let peer: DeviceID
    /// The peer's name as pending changes record it (cleaned).
    public let peerName: String
    /// Device: apply what arrives even when the policy is `ask` (`--accept`), for the keys the user asked for in
    /// this exchange (the machine's `accept` scope: the keys its pulls named, every key when one named none);
    /// never overrides `deny`. Other keys the desktop sends (a staged push) follow the policy.
    public let acceptOverride: Bool

    public struct Output: Sendable, Equatable {
        /// To send to the peer, in this order.
        public var messages: [ConfigMessage] = []
        public var notes: [ConfigNote] = []
    }

    public init(store: ConfigStore, peer: DeviceID, peerName: String, acceptOverride: Bool = false) {
        self.store = store
        self.peer = peer
        self.peerName = PeerText.escape(peerName, limit: 64)
        self.acceptOverride = acceptOverride
    }

    /// Device: the user's requests.
    public func start(_ machine: inout ConfigMachine, _ requests: [ConfigMachine.Request]) -> Output {
        let snapshot: ConfigTransaction
        do { snapshot = try store.read() } catch { return Output(notes: [.localFailure(error)]) }
        return run(&machine, .start(requests, ConfigView(snapshot, peer: peer)), snapshot: snapshot)
    }

    /// A config message of the peer (the envelope `MessageCodec` decoded). `paired`: desktop, whether the peer is
    /// still a paired device.
    public func received(_ machine: inout ConfigMachine, type: String, body: JSONValue, paired: Bool = true) -> Output {
        let snapshot = Result { () throws(ConfigError) -> ConfigTransaction in try store.read() }
        let view = snapshot.map { ConfigView($0, peer: peer, paired: paired) }
        return run(&machine, .received(type: type, body: body, view: view, now: store.now()), snapshot: try? snapshot.get())
    }

    func run(_ machine: inout ConfigMachine, _ event: ConfigMachine.Event, snapshot: ConfigTransaction?) -> Output {
        var out = Output()
        carryOut(machine.handle(event), &machine, snapshot, &out)
        return out
    }

    func carryOut(_ actions: [ConfigMachine.Action], _ machine: inout ConfigMachine, _ snapshot: ConfigTransaction?,
                  _ out: inout Output) {
        for action in actions {
            switch action {
            case .send(let message):
                out.messages.append(message)
            case .note(let note):
                out.notes.append(note)
            case let .resolve(batch, keys):
                let next: ConfigMachine.Event
                do {
                    next = .resolved(batch: batch, try resolve(keys, snapshot))
                } catch {
                    next = .failed(batch: batch, error)
                }
                carryOut(machine.handle(next), &machine, snapshot, &out)
            case let .apply(batch, entries, unstage, only, accept):
                let next: ConfigMachine.Event
                do {
                    next = .applied(batch: batch, try apply(entries, unstage: unstage, only: only,
                                                            accept: acceptOverride ? accept : .nothing))
                } catch {
                    next = .failed(batch: batch, error)
                }
                carryOut(machine.handle(next), &machine, snapshot, &out)
            case .unstage(let id):
                do {
                    try store.update { tx throws(ConfigError) in
                        tx.outbox.items.removeAll { $0.id == id && $0.device == peer }
                    }
                } catch {
                    out.notes.append(.localFailure(error))
                }
            }
        }
    }

    func resolve(_ keys: [String], _ snapshot: ConfigTransaction?) throws(ConfigError) -> [ConfigUpdate] {
        guard let snapshot else { throw ConfigError(.local, "the config store could not be read") }
        return try snapshot.updates(for: keys.compactMap { snapshot.document.records[$0] })
    }

    /// One commit: the batch under the policy for the peer (keys outside `only` left out, `accept` applied
    /// under `ask`), and the staged pull it answers.
    func apply(_ entries: [ConfigUpdate], unstage: String?, only: KeyScope, accept: KeyScope) throws(ConfigError) -> ConfigResult {
        try store.update { tx throws(ConfigError) -> ConfigResult in
            let result = try tx.apply(entries, from: peer, name: peerName, acceptOverride: accept, only: only)
            if let unstage { tx.outbox.items.removeAll { $0.id == unstage && $0.kind == .pull && $0.device == peer } }
            return result
        }
    }
}
