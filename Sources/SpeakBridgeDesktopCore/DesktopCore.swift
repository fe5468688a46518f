import SpeakBridgeCrypto
import SpeakBridgeProtocol

/// The backlog lookups the core needs from the delivery pipeline. Lookups only: they change nothing.
public protocol BacklogGauge {
    /// At or above the hard limit: no message of this device is accepted now.
    func isOverflowing(_ device: DeviceID) -> Bool
    /// Over the high-water mark and not yet drained.
    func isThrottled(_ device: DeviceID) -> Bool
    /// Handed to the sinks, not yet taken by every sink (for the log).
    func undelivered(_ device: DeviceID) -> BacklogMeter.Level
}

/// The desktop, as a value: events in, actions out. It owns every connection's `ResponderMachine`, the
/// per-device `SessionLedger`s (the one place exactly-once is decided), the pairing code, the paired devices'
/// psks, the connection→device map, paused connections and the counters. It never touches a socket, a file, a
/// thread or a clock: time comes in with each event (`now`, seconds since 1970), and the shell carries out the
/// actions.
///
/// Flow of one chunk: `.frame` → the connection's machine decrypts it → `.deliver` → backlog check (`.close`
/// with `.overloaded` at the hard limit) → the ledger drops duplicates → `.submit` of the new chunks → (the
/// pipeline writes them to every sink and makes that durable) → `.durable` → the ledger moves the ack level →
/// `ack` on every established connection of that device.
/// Pairing: message 1 under the code's secret consumes the code; a confirmed pairing is `.persistPeer`ed and
/// `paired` goes out only after `.pairingSaved` (`.pairingNotSaved` closes with 1011, as before).
/// Browser route: `.connected` brings the connection's `ConnectionRoute` (its machine runs the cipher the
/// subprotocol chose; a pairing on it is saved with its kind); a `browser` device's `config-*` messages get
/// `unknown-type` here, never a `.configRequest`.
public struct DesktopCore {
    public struct Configuration {
        public var localStatic: X25519PrivateKey
        public var localName: String
        /// Whether a config module answers `config-*` messages (else they get `unknown-type`).
        public var takesConfig: Bool

        public init(localStatic: X25519PrivateKey, localName: String, takesConfig: Bool) {
            self.localStatic = localStatic
            self.localName = localName
            self.takesConfig = takesConfig
        }
    }

    struct Connection {
        var machine: ResponderMachine
        /// Cipher and kind of the transport it came over (a pairing on it is saved with this kind).
        var route: ConnectionRoute
        var device: DeviceID?
        /// A confirmed pairing waiting to be saved: the frames (`paired`) that go out once it is.
        var unsavedPairing: [[UInt8]]?
        /// `.configOpened` and `.configRequest`s of this connection the config module has not answered yet.
        var configAsked = 0
    }

    struct HeldKey: Hashable {
        var device: DeviceID
        var session: String
        var sink: String
    }

    let configuration: Configuration
    let backlog: any BacklogGauge
    /// Read-only outside: `clients.name(of:)` from the daemon reads this field alone, not a copy of the whole core.
    public private(set) var clients: PairedClients

    /// The name a paired device gave itself (for sinks that show it), nil when unknown.
    public func name(of device: DeviceID) -> String? { clients.name(of: device) }

    /// When the core next needs a `.tick` (the pairing code's expiry, so its secret is wiped on time; the end of a
    /// log throttle's window that hid lines, so their count is said then); nil when nothing is timed, and the shell
    /// need not wake at all.
    public var nextDeadline: Double? {
        guard let flush = throttle.deadline else { return code.active?.expiry }
        guard let expiry = code.active?.expiry else { return flush }
        return min(flush, expiry)
    }
    var code = PairingCodeState()
    var connections: [ConnectionID: Connection] = [:]
    var ledgers: [DeviceID: SessionLedger] = [:]
    /// The device whose ledger `deliver` used last and where that ledger is, until `ledgers` gains or loses one
    /// (`deliver` adding a device's first, `restore`, `revoke`: each clears it). A paced line's chunk then finds its
    /// ledger without hashing the device.
    var lastLedger: (device: DeviceID, index: Dictionary<DeviceID, SessionLedger>.Index)?
    /// Each device's authenticated connections, ascending (the acks' targets: no pass over every connection per
    /// ack). Kept with `connections`: added at `.authenticated`, removed with the connection (`forget`).
    var authenticated: [DeviceID: [ConnectionID]] = [:]
    /// Connections not being read because their device is over the high-water mark.
    var paused: [DeviceID: Set<ConnectionID>] = [:]
    /// Connections not being read because `configAskedPause` of their config messages wait for an answer (each
    /// is a whole decoded body and a pass over the config store on one serial queue shared by every device). A
    /// connection may be in both this and `paused`: it is read again only when neither holds it.
    var configPaused: Set<ConnectionID> = []
    /// Unanswered config messages at which a connection's reading pauses, and at which one more closes it (1013):
    /// frames already read when the pause took effect (one read's worth: small messages) still come in between.
    static let configAskedPause = 4
    static let configAskedLimit = 64
    /// The most authenticated session connections one device holds; the next closes its oldest (1008).
    public static let maxConnectionsPerDevice = 8
    /// When each device's last "reading paused" was logged, and the pauses since that were not: a burst into a
    /// sink slower than the device (a FIFO whose reader keeps up only just) pauses it about ten times a second,
    /// and each pause logged filled a terminal (`pauseLogInterval`). One entry per paired device at most.
    var pauseLog: [DeviceID: PauseLog] = [:]
    struct PauseLog {
        var at: Double
        var unlogged: Int
    }
    static let pauseLogInterval: Double = 10
    /// The last `held` sent per (device, session, sink): sent again only when it changes.
    var heldSent: [HeldKey: HeldNotice] = [:]
    public internal(set) var stats = DesktopStats()
    /// Refusals a stranger can multiply are logged at most a few times in 10 s (`LogThrottle`).
    var throttle = LogThrottle()
    var now: Double = 0

    public init(configuration: Configuration, clients: [PairedClient], backlog: any BacklogGauge,
                maxPairingFailures: Int = SpeakBridgeProtocol.pairingMaxFailures) {
        self.configuration = configuration
        self.clients = PairedClients(clients)
        self.backlog = backlog
        code = PairingCodeState(maxFailures: maxPairingFailures)
    }

    /// Seeds the ledgers from durable state (after a restart): live sessions at their ack level, retired ones;
    /// sessions beyond the live bound are retired now (the returned `.retire` actions).
    public mutating func restore(live: [SessionLevel], retired: [SessionLevel]) -> [DesktopAction] {
        lastLedger = nil  // ledgers are added below
        for level in live {
            ledgers[level.device, default: SessionLedger()].restore(session: level.session, delivered: level.seq)
        }
        for level in retired {
            ledgers[level.device, default: SessionLedger()].restoreRetired(session: level.session, delivered: level.seq)
        }
        var actions: [DesktopAction] = []
        for device in Array(ledgers.keys) {
            for retirement in ledgers[device]!.trim() { actions.append(.retire(device, retirement)) }
        }
        return actions
    }

    // MARK: - Events

    public mutating func handle(_ event: DesktopEvent, now: Double) -> [DesktopAction] {
        self.now = max(self.now, now)
        code.expire(at: self.now)
        switch event {
        case let .connected(id, path, remote, route):
            return connected(id, path: path, remote: remote, route: route)
        case let .frame(id, bytes):
            return frame(id, bytes)
        case .closed(let id):
            guard let connection = forget(id) else { return [] }
            return [.log(LogLine(.debug, "connection \(id) closed" + (connection.device.map { " (device \($0))" } ?? "")))]
        case .tick:
            return throttle.flush(now: self.now).map { .log($0) }
        case let .pressure(id, device, pressure):
            return self.pressure(id, device, pressure)
        case .durable(let levels):
            return durable(levels)
        case .drained(let devices):
            return drained(devices)
        case let .sinkHeld(sink, reason, levels):
            return held(sink: sink, reason: reason, levels)
        case let .pairingSaved(id, outcome, kind):
            return pairingSaved(id, outcome, kind: kind)
        case let .pairingNotSaved(id, outcome, message, hint):
            var actions: [DesktopAction] = [
                .log(LogLine(.error, "pairing with \(outcome.deviceID) could not be saved: \(message)", hint: hint)),
            ]
            if connections[id] != nil { actions += close(id, .failed(.cannotSavePairing(message))) }
            return actions
        case let .configReplies(id, messages):
            return configAnswered(id) + send(messages, on: id)
        case let .pairingCodeIssued(secret, expiry, kind):
            code.issue(secret: secret, expiry: expiry, kind: kind)
            return []
        case .revoked(let device):
            return revoke(device)
        }
    }

    /// What `status` shows of the core.
    public var status: DesktopStatus {
        var sessions: [DesktopStatus.Session] = []
        for (device, ledger) in ledgers {
            let name = clients.name(of: device) ?? ""
            for (session, entry) in ledger.allSessions {
                sessions.append(.init(device: device, name: name, session: session, delivered: entry.delivered))
            }
        }
        var perDevice: [DeviceID: Int] = [:]
        for connection in connections.values {
            if let device = connection.device { perDevice[device, default: 0] += 1 }
        }
        let connected = perDevice.sorted { $0.key.description < $1.key.description }
            .map { DesktopStatus.Connected(device: $0.key, name: clients.name(of: $0.key) ?? "", connections: $0.value) }
        return DesktopStatus(connections: connections.count, authenticated: perDevice.values.reduce(0, +),
                             connected: connected, sessions: sessions, stats: stats,
                             pairingActive: code.isActive(at: now))
    }

    /// The ack level of (device, session): live, retired or 0.
    public func delivered(_ device: DeviceID, _ session: String) -> UInt64 {
        ledgers[device]?.delivered(session) ?? 0
    }

    // MARK: - Connections

    mutating func connected(_ id: ConnectionID, path: String, remote: String,
                            route: ConnectionRoute) -> [DesktopAction] {
        let opened = "connection \(id) opened from \(remote) for \(path) (\(route.cipher.rawValue))"
        var actions: [DesktopAction] = [.log(LogLine(.debug, opened))]
        guard let intent = ConnectionIntent(path: path) else {
            stats.count(.rejected(.unknownPath))
            return actions + [.close(id, .rejected(.unknownPath))]
        }
        if intent == .pair && !code.isActive(at: now, for: route.kind) {
            let why = code.isActive(at: now)
                ? "the active pairing code is for a browser (`pair --web`) and this connection is native"
                : "no pairing code is active"
            if let line = throttle.admit(.pairingRefused,
                                         LogLine(.warning, "pairing attempt from \(remote) while \(why); refused"),
                                         now: now) {
                actions.append(.log(line))
            }
            stats.count(.rejected(.noPairingCode))
            return actions + [.close(id, .rejected(.noPairingCode))]
        }
        // The cipher the subprotocol chose (AESGCM for browsers): a message 1 under the other cipher fails.
        connections[id] = Connection(machine: ResponderMachine(intent: intent, context: inertContext(), cipher: route.cipher),
                                     route: route)
        return actions
    }

    /// What a machine keeps between frames: nothing to look up (each frame brings its own `context()`), so no
    /// connection holds on to an old copy of the ledgers or the psks.
    func inertContext() -> ResponderContext {
        ResponderContext(localStatic: configuration.localStatic, localName: configuration.localName,
                         pairingSecret: { nil }, sessionPSK: { _ in nil }, delivered: { _, _ in 0 })
    }

    /// A snapshot of what the machines may look up, for one frame: nothing of it stays in a machine, so the
    /// ledgers are not shared (and not copied) when they change next.
    func context(for route: DeviceKind) -> ResponderContext {
        Self.context(configuration, secret: code.secret(for: route), clients, ledgers)
    }

    /// From the fields it reads (a method on `self` made the optimizer copy the whole core per frame).
    static func context(_ configuration: Configuration, secret: SymmetricKey?, _ clients: PairedClients,
                        _ ledgers: [DeviceID: SessionLedger]) -> ResponderContext {
        // One object for the three lookups: each closure captures only it (one allocation per frame, not three).
        let snapshot = Snapshot(secret: secret, clients: clients, ledgers: ledgers)
        return ResponderContext(
            localStatic: configuration.localStatic, localName: configuration.localName,
            pairingSecret: { snapshot.secret },
            sessionPSK: { snapshot.clients.psk(for: $0) },
            delivered: { device, session in snapshot.ledgers[device]?.delivered(session) ?? 0 })
    }

    /// What one frame's context reads (immutable).
    final class Snapshot {
        let secret: SymmetricKey?
        let clients: PairedClients
        let ledgers: [DeviceID: SessionLedger]

        init(secret: SymmetricKey?, clients: PairedClients, ledgers: [DeviceID: SessionLedger]) {
            self.secret = secret
            self.clients = clients
            self.ledgers = ledgers
        }
    }

    mutating func frame(_ id: ConnectionID, _ bytes: [UInt8]) -> [DesktopAction] {
        guard let index = connections.index(forKey: id) else { return [] }
        let received: ResponderMachine.Received
        do {
            // The context snapshots the ledgers: it must be gone before `perform` changes them (else each frame
            // copies the ledger's tables). In place in the dictionary: a copy of the connection taken out and
            // written back shared its buffers with the stored one, so the machine's first write copied them.
            // Made only when the frame needs it (a handshake, a `resume`): not per chunk. The closure reads
            // local copies (its own references, gone with this scope), not `self`, which is being modified.
            // The code's secret only for a route it may be used on (a `pair --web` code issued after this native
            // connection opened is not its to use).
            // Asked only while a code is live: reading the connection's route copied the whole connection value
            // (its witness copy and a dozen retains) for every frame, every chunk of every device.
            let secret = code.active == nil ? nil : code.secret(for: connections.values[index].route.kind)
            let (configuration, clients, ledgers) = (configuration, clients, ledgers)
            received = connections.values[index].machine.receiveFrame(bytes) {  // one hash per frame
                Self.context(configuration, secret: secret, clients, ledgers)
            }
        }
        // A chunk message (every paced line): `perform` would look the connection up again to see that it is
        // still there, which it is (the machine cannot remove it). Same actions, one hash less; and the machine
        // hands it over as `.deliver` itself, not in an array of actions.
        let actions: [ResponderMachine.Action]
        switch received {
        case let .deliver(device, session, chunks):
            var out: [DesktopAction] = []
            deliver(device: device, session: session, chunks: chunks, on: id, into: &out)
            return out
        case .actions(let list):
            actions = list
        }
        if actions.count == 1, case let .deliver(device, session, chunks) = actions[0] {
            var out: [DesktopAction] = []
            deliver(device: device, session: session, chunks: chunks, on: id, into: &out)
            return out
        }
        return perform(actions, on: id)
    }

    /// Closes `id` (counted once here) and forgets it.
    mutating func close(_ id: ConnectionID, _ reason: CloseReason) -> [DesktopAction] {
        guard let connection = forget(id) else { return [] }
        stats.count(reason)
        let line = LogLine(.info, "connection closed: \(reason)")
        // A refusal before authentication is a stranger's to repeat; the closes of a paired device's connections
        // are that device's to repeat (a stolen key opening and closing connections in a loop); a revoke is not.
        if case .rejected(let rejection) = reason, rejection.isBeforeAuthentication {
            return (throttle.admit(.connectionRefused, line, now: now).map { [.log($0)] } ?? []) + [.close(id, reason)]
        }
        if let device = connection.device, !Self.isRevocation(reason) {
            return (throttle.admit(.device(device), line, now: now).map { [.log($0)] } ?? []) + [.close(id, reason)]
        }
        return [.log(line), .close(id, reason)]
    }

    /// A close because the device was revoked: the user's own act, always logged.
    static func isRevocation(_ reason: CloseReason) -> Bool {
        switch reason {
        case .rejected(.revoked), .rejected(.revokedDuringHandshake): return true
        default: return false
        }
    }

    /// Drops connection `id` and what refers to it (its device's pause and ack-target entries).
    mutating func forget(_ id: ConnectionID) -> Connection? {
        guard let connection = connections.removeValue(forKey: id) else { return nil }
        configPaused.remove(id)
        if let device = connection.device {
            paused[device]?.remove(id)
            authenticated[device]?.removeAll { $0 == id }
            if authenticated[device]?.isEmpty == true { authenticated[device] = nil }
        }
        return connection
    }

    /// Carries out what a machine asked for, in order.
    mutating func perform(_ machineActions: [ResponderMachine.Action], on id: ConnectionID) -> [DesktopAction] {
        var out: [DesktopAction] = []
        var holdingForSave = false
        for action in machineActions {
            guard connections[id] != nil else { break }
            switch action {
            case .send(let frame):
                if holdingForSave {
                    connections[id]!.unsavedPairing!.append(frame)
                } else {
                    out.append(.send(id, frame))
                }
            case let .authenticated(device, key):
                // The first transport message decrypted (not merely message 1, which a replay repeats).
                connections[id]!.device = device
                var ids = authenticated[device] ?? []
                ids.insert(id, at: ids.firstIndex { $0 > id } ?? ids.count)
                authenticated[device] = ids
                out.append(.markAuthenticated(id, device: device))
                // Authenticated connections leave the admission counts, so a paired device (or a stolen key) that
                // opened hundreds — each with its own send queue, and every ack going to each — would run the
                // daemon out of descriptors and memory. The oldest goes: a phone that moved opens a new one.
                if ids.count > Self.maxConnectionsPerDevice, let oldest = ids.first, oldest != id {
                    out += close(oldest, .rejected(.tooManyConnections(device)))
                }
                out.append(.touchPeer(key))
                if configuration.takesConfig && clients.kind(of: device) != .browser {
                    connections[id]!.configAsked += 1
                    out.append(.configOpened(id, device, name: clients.name(of: device) ?? ""))
                }
            case .consumePairingCode:
                code.consume()
            case .pairingAttemptFailed:
                if code.failed() {
                    out.append(.log(LogLine(.warning, "pairing code revoked after \(code.maxFailures) failed attempts; run `speakbridge pair` for a new one")))
                }
            case .pairingConfirmed(let outcome):
                holdingForSave = true
                connections[id]!.unsavedPairing = []
                let route = connections[id]!.route
                out.append(.persistPeer(id, outcome, name: Self.storedName(outcome), kind: route.kind,
                                        agent: route.kind == .browser ? route.agent : nil))
            case let .deliver(device, session, chunks):
                deliver(device: device, session: session, chunks: chunks, on: id, into: &out)
            case let .resumed(device, session):
                out += heldNotices(device: device, session: session, on: id)
            case let .config(device, type, body):
                if clients.kind(of: device) == .browser {
                    // A browser device sends dictation only (SECURITY.md): it may not pull or push config.
                    out += send([.error(code: .unknownType, message: "config transfer is off for browser devices",
                                        expected: nil)], on: id)
                } else if configuration.takesConfig {
                    out += askConfig(id, device, type: type, body: body)
                } else {
                    out += send([.error(code: .unknownType, message: "this desktop does not take config messages",
                                        expected: nil)], on: id)
                }
            case .close(let reason):
                out += close(id, reason)
            }
        }
        return out
    }

    /// Encrypts and sends `messages` on an open connection (nothing when it is gone).
    mutating func send(_ messages: [Message], on id: ConnectionID) -> [DesktopAction] {
        var out: [DesktopAction] = []
        for message in messages {
            guard var connection = connections[id] else { break }
            let actions = connection.machine.encryptAndSend(message)
            connections[id] = connection
            out += perform(actions, on: id)
        }
        return out
    }

    /// The name a pairing is saved under.
    static func storedName(_ outcome: PairingOutcome) -> String {
        outcome.peerName.isEmpty ? "device" : outcome.peerName
    }

    mutating func pairingSaved(_ id: ConnectionID, _ outcome: PairingOutcome, kind: DeviceKind) -> [DesktopAction] {
        clients.insert(PairedClient(publicKey: outcome.peerKey, name: Self.storedName(outcome), psk: outcome.sessionKey,
                                    kind: kind))
        var out: [DesktopAction] = [.log(LogLine(.info, "paired with \"\(outcome.peerName)\" (\(outcome.deviceID))"))]
        if let frames = connections[id]?.unsavedPairing {
            connections[id]!.unsavedPairing = nil
            out += frames.map { .send(id, $0) }
        }
        return out
    }

    /// Closes every live connection of a revoked device and drops its delivery state: a revoked device keeps
    /// nothing here.
    mutating func revoke(_ device: DeviceID) -> [DesktopAction] {
        clients.remove(device)
        var out: [DesktopAction] = []
        for (id, connection) in connections.sorted(by: { $0.key < $1.key }) where connection.device == device {
            out += close(id, .rejected(.revoked(device)))
        }
        paused[device] = nil
        ledgers[device] = nil
        lastLedger = nil
        pauseLog[device] = nil
        heldSent = heldSent.filter { $0.key.device != device }
        out.append(.forgetDelivery(device))
        return out
    }
}
