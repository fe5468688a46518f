import Foundation
import SpeakBridgeConfig
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore

public struct ConfigExchangeOptions: Sendable {
    public enum Operation: Sendable, Equatable {
        /// Offer these keys (nil: every key that is not local-only) to the desktop.
        case push([String]?)
        /// Ask the desktop for these keys (nil: all it shares).
        case pull([String]?)
        /// Both: pull everything, push everything.
        case sync
    }

    public var home: Home
    /// Which paired desktop (ID, ID prefix or name); nil = the only one.
    public var desktop: String?
    public var operation: Operation
    /// Apply what arrives even when the policy is `ask` (the user asked for it here); never overrides `deny`.
    public var acceptIncoming: Bool
    public var timeout: Double
    public var extraCandidates: [Candidate]

    public init(home: Home, desktop: String?, operation: Operation, acceptIncoming: Bool = false, timeout: Double = 15,
                extraCandidates: [Candidate] = []) {
        self.home = home
        self.desktop = desktop
        self.operation = operation
        self.acceptIncoming = acceptIncoming
        self.timeout = timeout
        self.extraCandidates = extraCandidates
    }
}

/// What an exchange did, for the CLI to report.
public struct ConfigExchangeReport: Sendable {
    public var desktopName: String
    /// The desktop's answers to our offers.
    public var delivered: [ConfigResult] = []
    /// What we did with the desktop's offers (origin: reply or staged).
    public var received: [(origin: String, result: ConfigResult)] = []
    /// Errors either side reported; non-empty means the exchange did not fully succeed.
    public var errors: [String] = []
    /// Secrets the desktop left out of its answers to our pulls (its share mode is `public`).
    public var withheld = 0
}

/// The capture device's side of config transfer: one session with the paired desktop.
///
/// Flow:
/// 1. Dial the desktop's known addresses; Noise IKpsk1 with the per-pair psk (`hello` / `welcome`), as `send` does.
/// 2. Send the requests: `config-pull` (pull, sync) and a `config-offer` batch (push, sync).
/// 3. Answer what arrives: complete offers are applied under this installation's policy (`config-result`),
///    the desktop's `config-pull` (a pull staged there) with an offer of what this installation shares.
/// 4. Done when every request of ours has its answer (the desktop sends its own requests before that answer):
///    send `bye` and hang up. A connection lost on the way applies nothing half: batches are all or nothing.
public final class ConfigExchange: @unchecked Sendable {
    let options: ConfigExchangeOptions
    let identity: Identity
    let peers: PeerStore
    let desktop: Peer
    let store: ConfigStore
    let queue = DispatchQueue(label: "sb-config")
    let done = DispatchSemaphore(value: 0)
    var link: SessionLink!
    // Owned by `queue`.
    var assembler = BatchAssembler()
    var outstanding: Set<String> = []
    var report: ConfigExchangeReport
    var outcome: ClientError??
    var established = false

    public init(options: ConfigExchangeOptions) throws(ClientError) {
        self.options = options
        (identity, peers) = try SessionLink.localState(options.home)
        desktop = try SessionLink.pairedDesktop(peers, options.desktop)
        do {
            store = try ConfigStore(home: options.home, device: identity.deviceID)
        } catch {
            throw ClientError(error.message, hint: error.hint)
        }
        report = ConfigExchangeReport(desktopName: desktop.name)
    }

    /// Runs the exchange; returns what happened, or throws when it could not complete (exit code 75: unreachable).
    public func run() throws(ClientError) -> ConfigExchangeReport {
        // Check what we would push before dialing: a typo should not cost a connection.
        let firstMessages: [ConfigMessage]
        do {
            firstMessages = try requests()
        } catch {
            throw ClientError(error.message, hint: error.hint)
        }
        link = try SessionLink(identity: identity, desktop: desktop, peers: peers, agent: "speakbridge-cli/0.1 config",
                               extraCandidates: options.extraCandidates, queue: queue) { [weak self] event in
            self?.handle(event, first: firstMessages)
        }
        queue.async { self.link.connect() }
        if done.wait(timeout: .now() + options.timeout) == .timedOut {
            queue.sync {
                finish(ClientError("the exchange with \"\(desktop.name)\" did not finish within \(Int(options.timeout)) s; nothing was half-applied",
                                   hint: "check that `speakbridge serve` runs there", exitCode: 75))
            }
            done.wait()
        }
        link.shutdown()
        let (error, report) = queue.sync { (outcome ?? nil, self.report) }
        if let error { throw error }
        return report
    }

    func requests() throws(ConfigError) -> [ConfigMessage] {
        var out: [ConfigMessage] = []
        switch options.operation {
        case .pull(let keys):
            out.append(.pull(batch: Self.newBatchID(), keys: keys))
        case .push(let keys):
            out += try pushBatch(keys)
        case .sync:
            out.append(.pull(batch: Self.newBatchID(), keys: nil))
            out += try pushBatch(nil)
        }
        return out
    }

    func pushBatch(_ keys: [String]?) throws(ConfigError) -> [ConfigMessage] {
        let tx = try store.read()
        for key in keys ?? [] {
            try ConfigKey.validate(key)
            guard tx.document.records[key] != nil else {
                throw ConfigError(.local, "\(key) is not set here", hint: "list the keys with `speakbridge config list`")
            }
            guard !tx.document.localOnly.contains(key) else {
                throw ConfigError(.local, "\(key) is local-only: it never leaves this machine",
                                  hint: "`speakbridge config local-only \(key) --off` to share it")
            }
        }
        let updates = try tx.offer(keys: keys, includeSecrets: true)
        return try ConfigWire.offer(batch: Self.newBatchID(), origin: "push", updates: updates)
    }

    static func newBatchID() -> String { "b-" + Hex.encode(SecureRandom.bytes(8)) }

    // MARK: - Events (on `queue`)

    func handle(_ event: SessionLink.Event, first: [ConfigMessage]) {
        guard outcome == nil else { return }
        switch event {
        case .established:
            guard !established else {
                finish(ClientError("the desktop moved to another address during the exchange; nothing was half-applied",
                                   hint: "run the command again", exitCode: 75))
                return
            }
            established = true
            for message in first {
                switch message {
                case .pull(let batch, _): outstanding.insert(batch)
                case .offer(let part): outstanding.insert(part.batch)
                default: break
                }
                transmit(message)
            }
            finishIfDone()
        case .received(let message):
            receive(message)
        case .lost(let reason):
            finish(ClientError("the connection to \"\(desktop.name)\" was lost (\(reason)); nothing was half-applied",
                               hint: "run the command again", exitCode: 75))
        case .unreachable(let reason, let refused):
            if refused {
                finish(ClientError("\"\(desktop.name)\" closed the connection during the handshake: this device is not (or no longer) paired there",
                                   hint: "if it was revoked, pair again: `speakbridge pair` there, `speakbridge join CODE` here"))
            } else {
                finish(ClientError("desktop \"\(desktop.name)\" not reachable (\(reason))",
                                   hint: "check that `speakbridge serve` runs there, or give --address HOST:PORT", exitCode: 75))
            }
        }
    }

    func receive(_ message: Message) {
        switch message {
        case let .config(type, body):
            do {
                try receiveConfig(try ConfigWire.decode(type: type, body: body))
            } catch {
                let batch = body["batch"]?.stringValue.flatMap { MessageCodec.isValidSessionID($0) ? $0 : nil }
                report.errors.append("refused \(type) from the desktop: \(error.code.rawValue): \(error.message)")
                transmit(.error(batch: batch, code: error.code == .local ? "internal" : error.code.rawValue, message: error.message))
                if let batch { outstanding.remove(batch) }
            }
        case let .error(code, text, _):
            finish(ClientError("the desktop refused: \(code): \(ConfigText.clean(text))",
                               hint: code == .unknownType ? "that desktop runs without config transfer" : nil))
            return
        case .bye:
            finish(ClientError("the desktop ended the session before the exchange finished"))
            return
        default:
            break
        }
        finishIfDone()
    }

    func receiveConfig(_ message: ConfigMessage) throws(ConfigError) {
        switch message {
        case .offer(let part):
            guard let (origin, entries, withheld) = try assembler.add(part, now: store.now()) else { return }
            if origin == "reply" { report.withheld += withheld }
            var result = try store.update { tx throws(ConfigError) -> ConfigResult in
                try tx.apply(entries, from: desktop.id, name: desktop.name, acceptOverride: options.acceptIncoming)
            }
            result.batch = part.batch
            outstanding.remove(part.batch)
            report.received.append((origin, result))
            transmit(.result(result))
        case let .pull(batch, keys):
            let tx = try store.read()
            let share = tx.document.policy.share
            guard share != .none else {
                report.errors.append("the desktop asked for this device's config; refused (share mode none)")
                transmit(.error(batch: batch, code: "denied", message: "this device shares no config (share mode none)"))
                return
            }
            outstanding.insert(batch)
            let updates = try tx.offer(keys: keys, includeSecrets: share == .all)
            let withheld = share == .all ? 0 : try tx.offer(keys: keys, includeSecrets: true).count - updates.count
            for m in try ConfigWire.offer(batch: batch, origin: "reply", updates: updates, withheld: withheld) {
                transmit(m)
            }
        case .result(let r):
            if outstanding.remove(r.batch) != nil { report.delivered.append(r) }
        case let .error(batch, code, text):
            report.errors.append("the desktop reported \(code): \(text)")
            if let batch { outstanding.remove(batch) }
            if batch == nil || code == ConfigError.Code.revoked.rawValue { outstanding.removeAll() }
        }
    }

    func transmit(_ message: ConfigMessage) {
        link.send([ConfigWire.message(message)])
    }

    func finishIfDone() {
        guard established, outstanding.isEmpty, outcome == nil else { return }
        link.send([.bye])
        finish(nil)
    }

    func finish(_ error: ClientError?) {
        guard outcome == nil else { return }
        outcome = .some(error)
        // Give the last frames a moment to leave before the connection goes.
        queue.asyncAfter(deadline: .now() + 0.05) {
            self.link.hangUp()
            self.done.signal()
        }
    }
}
