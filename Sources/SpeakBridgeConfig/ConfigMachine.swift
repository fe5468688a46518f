import SpeakBridgeProtocol
import SpeakBridgeSupport

/// Config transfer with one peer, without I/O: events in, actions out. The desktop keeps one per paired device
/// (`ConfigPeerHandler`), a capture device one per exchange (`ConfigExchange`); both carry its actions out with
/// `ConfigShell`, the only code that touches the store or the keyring.
///
/// Flow (PROTOCOL.md, "Config transfer"; the device always leads, the desktop cannot dial it):
/// 1. Device: `start` sends its requests — a `config-pull` and/or a `config-offer` batch — and waits for an
///    answer to each (`isSettled`).
/// 2. A `config-pull` is answered with an offer (`origin: reply`, same batch) of what the share mode allows, or
///    `config-error` `denied` (share mode `none`). A complete offer is applied under the consent policy (by the
///    shell) and answered with `config-result` — whatever its origin, so also a `reply`.
/// 3. Desktop: before the message that completes a device's request, the items its user staged for that device
///    go out (a staged push as an offer with origin `staged`, a staged pull as a `config-pull`), so the device has
///    seen every request before it considers the exchange finished. An item stays staged until the device
///    answers it; one sent and unanswered is sent again after `resendAfterMillis`.
/// 4. Anything refused is answered with `config-error` (never an error with an error) and changes nothing.
/// 5. An offer answering a pull that named keys (ours on a device, a staged one on the desktop) may bring only
///    those keys: any other key in it is left out — not stored, not held — listed as `skipped` in the
///    `config-result` and reported (`ConfigNote.unrequested`); the keys asked for still apply.
///
/// Every message is decoded here, once (`ConfigWire.decode`); every decision about what may leave (share mode,
/// withheld secrets) is made here too (`ConfigView.pullAnswer`). Consent (accept / ask / deny) is decided where
/// a batch is applied, `ConfigTransaction.apply`.
public struct ConfigMachine: Sendable {
    public enum Role: Sendable { case desktop, device }

    /// What the user of a device asks for at `start`.
    public enum Request: Sendable, Equatable {
        /// The peer's keys (nil: all it shares).
        case pull(batch: String, keys: [String]?)
        /// Offer these keys (nil: all that may leave).
        case push(batch: String, keys: [String]?)
    }

    public enum Event: Sendable {
        /// Device: the user's requests, before the session opens (a bad key fails here, costing no connection).
        case start([Request], ConfigView)
        /// A config message from the peer with a fresh view of the store, or why the store could not be read.
        case received(type: String, body: JSONValue, view: Result<ConfigView, ConfigError>, now: UInt64)
        /// The values `resolve` asked for.
        case resolved(batch: String, [ConfigUpdate])
        /// What `apply` did.
        case applied(batch: String, ConfigResult)
        /// `resolve` or `apply` failed in the shell (a peer's fault such as `forbidden`, or `local`).
        case failed(batch: String, ConfigError)
    }

    public enum Action: Sendable, Equatable {
        case send(ConfigMessage)
        /// Read the values of `keys` (secrets included) from the snapshot behind the view; answer `resolved`.
        case resolve(batch: String, keys: [String])
        /// Apply the complete batch from the peer under this installation's policy for it; answer `applied` (or
        /// `failed`). `unstage`: remove the staged pull with this ID in the same commit (the batch answers it).
        /// `only`: the keys it may bring (it answers a pull that named them); the others are checked with the
        /// batch but left out. `accept`: the keys this side's user asked for, which `--accept` may apply.
        case apply(batch: String, entries: [ConfigUpdate], unstage: String?, only: KeyScope, accept: KeyScope)
        /// Remove a staged item (it was answered, or cannot be sent).
        case unstage(String)
        case note(ConfigNote)
    }

    /// An offer this side is preparing: waits for `resolved`.
    struct Preparing: Sendable {
        var origin: ConfigOrigin
        var withheld: Int
    }

    public static let resendAfterMillis: UInt64 = 30_000

    public let role: Role
    var assembler = BatchAssembler()
    /// Device: batches of ours (and of the desktop's pulls we answered) still waiting for their answer.
    var outstanding: Set<String> = []
    /// Desktop: staged items sent and not answered yet → when they were sent (Unix ms).
    var inFlight: [String: UInt64] = [:]
    var preparing: [String: Preparing] = [:]
    /// Origin of each batch being applied (for the note once `applied` comes back), and the keys it brought
    /// that its pull did not ask for.
    var applying: [String: (origin: ConfigOrigin, withheld: Int, unrequested: [String])] = [:]
    /// Pulls that named keys → those keys: ours on a device, the staged ones sent on the desktop. An offer with
    /// such a batch ID answers that pull and may bring only these keys. Kept for the machine's life, so a second
    /// answer to the same pull is held to it too.
    var pullKeys: [String: Set<String>] = [:]
    /// Device: the keys the user asked for in this exchange (the union of its pulls; `every` when one named
    /// none): what the shell's `acceptOverride` (`--accept`) may apply. Anything else the desktop sends (a staged
    /// push) follows the policy.
    var asked: KeyScope = .nothing

    public init(role: Role) { self.role = role }

    /// Device: every request of ours has its answer (and so, by rule 3, every request of the desktop arrived).
    public var isSettled: Bool { outstanding.isEmpty && preparing.isEmpty && applying.isEmpty }

    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case let .start(requests, view):
            return start(requests, view)
        case let .received(type, body, view, now):
            switch view {
            case .failure(let error):
                if type == ConfigWire.errorType { return [.note(.localFailure(error))] }
                let batch = ConfigWire.batchHint(body)
                if let batch { outstanding.remove(batch) }
                return refuse(type: type, batch: batch, error)
            case .success(let view):
                guard role == .device || view.paired else {
                    if type == ConfigWire.errorType { return [.note(.notPaired(type: type))] }
                    return [.note(.notPaired(type: type)),
                            .send(.error(batch: ConfigWire.batchHint(body), code: ConfigError.Code.revoked.rawValue,
                                         message: "this device is not paired with this desktop"))]
                }
                let message: ConfigMessage
                do {
                    message = try ConfigWire.decode(type: type, body: body)
                } catch {
                    // Never answer an error with an error (two peers would bounce it forever).
                    if type == ConfigWire.errorType { return [] }
                    let batch = ConfigWire.batchHint(body)
                    if let batch { outstanding.remove(batch) }
                    return refuse(type: type, batch: batch, error)
                }
                return receive(message, type: type, view: view, now: now)
            }
        case let .resolved(batch, updates):
            return offer(batch, updates)
        case let .applied(batch, result):
            var result = result
            result.batch = batch
            let (origin, withheld, unrequested) = applying.removeValue(forKey: batch) ?? (.push, 0, [])
            inFlight[batch] = nil
            outstanding.remove(batch)
            var out: [Action] = []
            if !unrequested.isEmpty { out.append(.note(.unrequested(batch: batch, keys: unrequested))) }
            out.append(.note(.received(origin: origin, result: result, withheld: withheld)))
            // The peer learns they were not taken: `skipped` (ignored here).
            result.skipped += unrequested
            return out + [.send(.result(result))]
        case let .failed(batch, error):
            if let prepared = preparing.removeValue(forKey: batch) {
                switch prepared.origin {
                case .reply:
                    outstanding.remove(batch)
                    return refuse(type: ConfigWire.pullType, batch: batch, error)
                case .staged:
                    inFlight[batch] = nil
                    // A locked keyring may work next time; a batch that cannot fit never will.
                    if error.code == .local { return [.note(.localFailure(error))] }
                    return [.note(.stagedDropped(id: batch, reason: error.message)), .unstage(batch)]
                case .push:
                    outstanding.remove(batch)
                    return [.note(.localFailure(error))]
                }
            }
            applying[batch] = nil
            outstanding.remove(batch)
            return refuse(type: ConfigWire.offerType, batch: batch, error)
        }
    }

    // MARK: - requests of our own (device)

    mutating func start(_ requests: [Request], _ view: ConfigView) -> [Action] {
        var out: [Action] = []
        for request in requests {
            switch request {
            case let .pull(batch, keys):
                outstanding.insert(batch)
                asked = asked.union(KeyScope(keys))
                if let keys { pullKeys[batch] = Set(keys) }
                out.append(.send(.pull(batch: batch, keys: keys)))
            case let .push(batch, keys):
                do {
                    try view.checkPush(keys)
                } catch {
                    return [.note(.localFailure(error))]
                }
                outstanding.insert(batch)
                preparing[batch] = Preparing(origin: .push, withheld: 0)
                out.append(.resolve(batch: batch, keys: view.pushKeys(keys)))
            }
        }
        return out
    }

    // MARK: - the peer's messages

    mutating func receive(_ message: ConfigMessage, type: String, view: ConfigView, now: UInt64) -> [Action] {
        switch message {
        case let .pull(batch, keys):
            var out = staged(view, now: now)
            guard let answer = view.pullAnswer(keys) else {
                return out + [.note(.refusedPull(batch: batch)),
                              .send(.error(batch: batch, code: "denied", message: "this \(me) shares no config (share mode none)"))]
            }
            if role == .device { outstanding.insert(batch) }  // the desktop answers our reply with config-result
            preparing[batch] = Preparing(origin: .reply, withheld: answer.withheld)
            out.append(.resolve(batch: batch, keys: answer.keys))
            return out
        case .offer(let part):
            let whole: (origin: ConfigOrigin, entries: [ConfigUpdate], withheld: Int)?
            do {
                whole = try assembler.add(part)
            } catch {
                outstanding.remove(part.batch)
                return refuse(type: type, batch: part.batch, error)
            }
            guard let whole else { return [] }
            var out = staged(view, now: now)
            let stagedPull = role == .desktop ? view.staged.first { $0.id == part.batch && $0.kind == .pull } : nil
            // The pull this offer answers, by batch ID (never by `origin`, which is informational): it may bring
            // only the keys that pull named.
            var only = KeyScope.every
            if let keys = pullKeys[part.batch] {
                only = .only(keys)
            } else if let keys = stagedPull?.keys {
                only = .only(Set(keys))
            }
            let unrequested = whole.entries.map(\.key).filter { !only.contains($0) }
            applying[part.batch] = (whole.origin, whole.withheld, unrequested)
            out.append(.apply(batch: part.batch, entries: whole.entries, unstage: stagedPull == nil ? nil : part.batch,
                              only: only, accept: asked))
            return out
        case .result(let result):
            switch role {
            case .device:
                guard outstanding.remove(result.batch) != nil else { return [] }
                return [.note(.delivered(result))]
            case .desktop:
                guard inFlight.removeValue(forKey: result.batch) != nil else { return [.note(.delivered(result))] }
                return [.note(.stagedDelivered(result)), .unstage(result.batch)]
            }
        case let .error(batch, code, text):
            var out: [Action] = [.note(.peerError(batch: batch, code: code, message: text))]
            if let batch {
                outstanding.remove(batch)
                if inFlight.removeValue(forKey: batch) != nil {
                    out += [.note(.stagedDropped(id: batch, reason: "the device refused it: \(code)")), .unstage(batch)]
                }
            }
            if batch == nil || code == ConfigError.Code.revoked.rawValue { outstanding.removeAll() }
            return out
        }
    }

    /// Desktop: the staged items for this device that are not already on their way.
    mutating func staged(_ view: ConfigView, now: UInt64) -> [Action] {
        guard role == .desktop else { return [] }
        var out: [Action] = []
        for item in view.staged {
            if let sent = inFlight[item.id], now < sent &+ Self.resendAfterMillis { continue }
            inFlight[item.id] = now
            switch item.kind {
            case .pull:
                if let keys = item.keys { pullKeys[item.id] = Set(keys) }
                out.append(.send(.pull(batch: item.id, keys: item.keys)))
            case .push:
                preparing[item.id] = Preparing(origin: .staged, withheld: 0)
                out.append(.resolve(batch: item.id, keys: view.pushKeys(item.keys)))
            }
        }
        return out
    }

    // MARK: - our offers

    /// The values for an offer arrived: split into parts and send, or refuse a batch that cannot fit.
    mutating func offer(_ batch: String, _ updates: [ConfigUpdate]) -> [Action] {
        guard let prepared = preparing.removeValue(forKey: batch) else { return [] }
        do {
            let parts = try ConfigWire.offer(batch: batch, origin: prepared.origin, updates: updates, withheld: prepared.withheld)
            var out: [Action] = []
            if prepared.origin == .reply { out.append(.note(.answeredPull(batch: batch, sent: updates.count, withheld: prepared.withheld))) }
            return out + parts.map(Action.send)
        } catch {
            preparing[batch] = prepared
            return handle(.failed(batch: batch, error))
        }
    }

    /// This side in messages to the peer.
    var me: String { role == .desktop ? "desktop" : "device" }

    /// A `config-error` for the peer about `type`, and the note saying why.
    func refuse(type: String, batch: String?, _ error: ConfigError) -> [Action] {
        if error.code == .local {
            return [.note(.localFailure(error)),
                    .send(.error(batch: batch, code: "internal", message: "the \(me) could not complete this (see its log)"))]
        }
        return [.note(.rejected(type: PeerText.escape(type, limit: 32), error)),
                .send(.error(batch: batch, code: error.code.rawValue, message: error.message))]
    }
}

/// What happened, for the shell to log (desktop) or report (device). Texts from the peer are already cleaned.
public enum ConfigNote: Sendable, Equatable {
    /// A pull of the peer answered with `sent` keys; `withheld` secrets left out by the share mode `public`.
    case answeredPull(batch: String, sent: Int, withheld: Int)
    /// A pull of the peer refused: the share mode is `none`.
    case refusedPull(batch: String)
    /// A complete batch of the peer, applied (or held, or denied) here; `withheld`: secrets its share mode left out.
    /// `result.skipped` lists only the keys local-only here (not those of `unrequested`).
    case received(origin: ConfigOrigin, result: ConfigResult, withheld: Int)
    /// The peer's answer to a pull that named keys brought `keys` besides them: refused (nothing of them stored or
    /// held), while the keys asked for were applied under the policy. Comes before that batch's `received`. Keys
    /// are valid key syntax (checked on decoding), so safe to print.
    case unrequested(batch: String, keys: [String])
    /// The peer's answer to a batch of ours.
    case delivered(ConfigResult)
    /// Desktop: a staged push the device answered (the item is removed).
    case stagedDelivered(ConfigResult)
    /// Desktop: a staged item removed without being delivered.
    case stagedDropped(id: String, reason: String)
    /// A message of the peer refused with `config-error`.
    case rejected(type: String, ConfigError)
    /// The peer sent `config-error`.
    case peerError(batch: String?, code: String, message: String)
    /// Failed on this machine (storage, keyring, or a push the user asked for that cannot be sent).
    case localFailure(ConfigError)
    /// Desktop: a config message from a device that is not (or no longer) paired.
    case notPaired(type: String)
}
