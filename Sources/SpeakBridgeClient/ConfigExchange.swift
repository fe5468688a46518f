import Dispatch
import FoundationEssentials
import SpeakBridgeConfig
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

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
    /// Apply what arrives even when the policy is `ask`, for the keys the user asked for here (those `pull`
    /// named; every key for a pull without keys and for `sync`); never overrides `deny`. A key the desktop sends
    /// besides them (a staged push) follows the policy; one its answer to the pull brings besides them is refused.
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
    public var received: [(origin: ConfigOrigin, result: ConfigResult)] = []
    /// Errors either side reported; non-empty means the exchange did not fully succeed.
    public var errors: [String] = []
    /// Secrets the desktop left out of its answers to our pulls (its share mode is `public`).
    public var withheld = 0
}

/// The capture device's side of config transfer: one session with the paired desktop, driving a `ConfigMachine`
/// (role device) whose actions `ConfigShell` carries out against this installation's store.
///
/// Flow:
/// 1. Before dialing: the machine turns the user's requests into messages (a bad key fails here, costing no
///    connection): `config-pull` (pull, sync) and a `config-offer` batch (push, sync).
/// 2. Dial the desktop's known addresses; Noise IKpsk1 with the per-pair psk (`hello` / `welcome`), as `send` does;
///    send the requests.
/// 3. Every `config-*` message goes to the machine, which answers it (offers applied under this installation's
///    policy → `config-result`; the desktop's staged pull → an offer of what this installation shares).
/// 4. Done when the machine is settled (every request of ours has its answer; the desktop sends its own requests
///    before that answer): send `bye` and hang up. A connection lost on the way applies nothing half: batches are
///    all or nothing.
public final class ConfigExchange: @unchecked Sendable {
    // @unchecked: the `var`s are read and written only on `queue` (SessionLink delivers its events there, `run`
    // enters it with `queue.sync`), except `machine` in `run` before the link exists (nothing else runs yet; the
    // `queue.async` that starts the link orders that write before every later use); the `let`s never change.
    let options: ConfigExchangeOptions
    let identity: Identity
    let peers: PeerStore
    let desktop: Peer
    let shell: ConfigShell
    let queue = LockedQueue(label: "sb-config")
    let done = DispatchSemaphore(value: 0)
    var link: SessionLink!
    // Owned by `queue`.
    var machine = ConfigMachine(role: .device)
    var report: ConfigExchangeReport
    var outcome: ClientError??
    var established = false

    public init(options: ConfigExchangeOptions) throws(ClientError) {
        self.options = options
        (identity, peers) = try SessionLink.localState(options.home)
        desktop = try SessionLink.pairedDesktop(peers, options.desktop)
        let store: ConfigStore
        do {
            store = try ConfigStore(home: options.home, device: identity.deviceID)
        } catch {
            throw ClientError(error.message, hint: error.hint)
        }
        shell = ConfigShell(store: store, peer: desktop.id, peerName: desktop.name, acceptOverride: options.acceptIncoming)
        report = ConfigExchangeReport(desktopName: desktop.name)
    }

    /// Runs the exchange; returns what happened, or throws when it could not complete (exit code 75: unreachable).
    public func run() throws(ClientError) -> ConfigExchangeReport {
        // Check what we would push before dialing: a typo should not cost a connection.
        let first = shell.start(&machine, requests())
        for note in first.notes {
            if case .localFailure(let error) = note { throw ClientError(error.message, hint: error.hint) }
        }
        link = try SessionLink(identity: identity, desktop: desktop, peers: peers, agent: "speakbridge-cli/0.1 config",
                               extraCandidates: options.extraCandidates, queue: queue) { [weak self] event in
            self?.handle(event, first: first.messages)
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

    func requests() -> [ConfigMachine.Request] {
        switch options.operation {
        case .pull(let keys): [.pull(batch: Self.newBatchID(), keys: keys)]
        case .push(let keys): [.push(batch: Self.newBatchID(), keys: keys)]
        case .sync: [.pull(batch: Self.newBatchID(), keys: nil), .push(batch: Self.newBatchID(), keys: nil)]
        }
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
            transmit(first)
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
            let output = shell.received(&machine, type: type, body: body)
            for note in output.notes { record(note) }
            transmit(output.messages)
        case let .error(code, text, _):
            finish(ClientError("the desktop refused: \(code): \(PeerText.escape(text, limit: 256))",
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

    /// The machine's notes as the report the CLI prints.
    func record(_ note: ConfigNote) {
        switch note {
        case .delivered(let result), .stagedDelivered(let result):
            report.delivered.append(result)
        case let .received(origin, result, withheld):
            report.received.append((origin, result))
            if origin == .reply { report.withheld += withheld }
        case .refusedPull:
            report.errors.append("the desktop asked for this device's config; refused (share mode none)")
        case let .unrequested(_, keys):
            report.errors.append("\"\(PeerText.escape(desktop.name, limit: 64))\" answered the pull with \(keys.count) key(s) it did not ask for; "
                                 + "refused them, nothing of them was stored: \(PeerText.escape(keys.joined(separator: ", "), limit: 512))")
        case let .rejected(type, error):
            report.errors.append("refused \(type) from the desktop: \(error.code.rawValue): \(error.message)")
        case let .peerError(_, code, text):
            report.errors.append("the desktop reported \(code): \(text)")
        case .localFailure(let error):
            report.errors.append(error.message)
        case .answeredPull, .stagedDropped, .notPaired:
            break
        }
    }

    func transmit(_ messages: [ConfigMessage]) {
        guard !messages.isEmpty else { return }
        link.send(messages.map(ConfigWire.message))
    }

    func finishIfDone() {
        guard established, machine.isSettled, outcome == nil else { return }
        link.send([.bye])
        finish(nil)
    }

    func finish(_ error: ClientError?) {
        guard outcome == nil else { return }
        outcome = .some(error)
        // Give the last frames a moment to leave before the connection goes.
        queue.asyncAfter(.milliseconds(50)) {
            self.link.hangUp()
            self.done.signal()
        }
    }
}
