import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore
import SpeakBridgeWebSocket

/// `speakbridge serve`: the desktop.
///
/// Flow:
/// 1. Load the identity and paired devices, open the progress log, start the sinks (`DeliveryPipeline`).
/// 2. Listen for WebSockets (lws thread). Each event hops to `queue`, the one serial queue that owns every
///    `ResponderMachine` and `SessionLedger`; their actions are carried out there.
/// 3. Accepted chunks go to the pipeline; when they are in every sink and durable, acks go back on `queue`.
///    Bounded by construction: a device's connections stop being read while its undelivered backlog is over the
///    high-water mark (resumed when the pipeline reports it drained); above the hard limit a message is refused
///    by closing that connection; each device has at most 64 live sessions (`SessionLedger`).
/// 4. The control socket (`status`, `pair`, `devices`, `revoke`) runs on its own thread and reads shared state
///    through locks or by hopping onto `queue`.
public final class Daemon: @unchecked Sendable {
    let options: DaemonOptions
    /// flock on state/daemon.lock, held for the life of the process.
    let lockFD: Int32
    let identity: Identity
    let peers: PeerStore
    let progress: ProgressLog
    let codes: PairingCodes
    let queue = DispatchQueue(label: "sb-daemon")
    let startedAt = Date()
    var pipeline: DeliveryPipeline!
    var server: WebSocketServer!
    var control: ControlServer!
    var discovery: DiscoveryService?
    var web: WebFront!

    // Owned by `queue`.
    var machines: [WebSocketConnectionID: ResponderMachine] = [:]
    var connectionDevice: [WebSocketConnectionID: DeviceID] = [:]
    var ledgers: [DeviceID: SessionLedger] = [:]
    /// Connections whose reading is paused because their device's backlog is over the high-water mark.
    var paused: [DeviceID: Set<WebSocketConnectionID>] = [:]
    var stats = DaemonStats()

    public init(options: DaemonOptions) throws {
        self.options = options
        lockFD = try options.home.lockDaemon()
        codes = PairingCodes(lifetime: TimeInterval(options.pairingLifetime))
        identity = try Identity.loadOrCreate(options.home)
        peers = try PeerStore(home: options.home)
        progress = try ProgressLog(path: options.home.progressFile)
        let sinks = try options.sinks.map { spec throws(SinkError) in
            try SinkFactory.make(spec, sanitize: !options.raw, environment: ProcessInfo.processInfo.environment)
        }
        pipeline = DeliveryPipeline(sinks: sinks, progress: progress, onDurable: { [weak self] advanced in
            guard let self else { return }
            self.queue.async { self.durable(advanced) }
        }, onDrained: { [weak self] devices in
            guard let self else { return }
            self.queue.async { self.drained(devices) }
        })
        restoreLedgers()
        // lws warns for every refused upgrade (wrong path or subprotocol, over the cap): a port scan would fill
        // the log, so those lines are dropped; other lws lines keep going to stderr.
        WebSocketLog.setHandler { level, line in
            if line.contains("denied connection") { return }
            if level == .error { Console.error("lws: " + line) } else { Console.warning("lws: " + line) }
        }
        var config = WebSocketServerConfiguration()
        config.host = options.host
        config.port = options.port
        config.subprotocol = SpeakBridgeProtocol.subprotocol
        config.allowedPaths = Set(ConnectionIntent.allCases.map(\.path))
        config.maxMessageSize = SpeakBridgeProtocol.maxFrameSize
        config.handshakeTimeout = SpeakBridgeProtocol.handshakeTimeout
        config.maxUnauthenticated = SpeakBridgeProtocol.maxUnauthenticated
        config.maxUnauthenticatedPerAddress = SpeakBridgeProtocol.maxUnauthenticatedPerAddress
        web = WebFront.prepare(options, identity: identity, config: &config)
        // `queue.sync` from the lws thread: when the queue is idle the handler runs right on the lws thread
        // (no wake-up of another thread per frame); the critical sections are short and never wait on lws.
        (server, web) = try web.startServer(config) { [weak self] event in
            guard let self else { return }
            self.queue.sync { self.handle(event) }
        }
        control = try ControlServer(path: options.home.controlSocket) { [weak self] request in
            self?.control(request) ?? ControlReply.failure("daemon is shutting down")
        }
        if options.mdns {
            discovery = DiscoveryService(name: serviceName, port: server.port, deviceID: identity.deviceID)
        }
    }

    public var port: Int { server.port }
    public var deviceID: DeviceID { identity.deviceID }

    var serviceName: String { options.name ?? "SpeakBridge \(identity.deviceID.compact.prefix(4))" }

    /// Stops in order of importance: no new frames, sinks stopped, progress durable, control socket gone; the
    /// mDNS withdrawal (a D-Bus round trip to avahi-daemon that can stall) comes last, so a caller that gives
    /// up waiting loses nothing.
    public func stop() {
        server.shutdown()
        pipeline.stop()
        try? progress.sync()
        control.stop()
        discovery?.stop()
    }

    // MARK: - Connections (on `queue`)

    func context() -> ResponderContext {
        ResponderContext(
            localStatic: identity.privateKey, localName: serviceName,
            pairingSecret: { [codes] in codes.secret() },
            sessionPSK: { [peers] key in
                guard let peer = peers.peer(key: key), peer.role == .client else { return nil }
                return peer.psk
            },
            delivered: { [unowned self] device, session in
                ledgerDelivered(device, session)
            })
    }

    /// The `resume` answer: live, retired or unknown (0). Creates no state, so `resume` alone cannot grow it.
    func ledgerDelivered(_ device: DeviceID, _ session: String) -> UInt64 {
        ledgers[device]?.delivered(session) ?? 0
    }

    func handle(_ event: WebSocketEvent) {
        switch event {
        case let .opened(id, path, remote):
            Console.debug("connection \(id) opened from \(remote) for \(path)")
            guard let intent = ConnectionIntent(path: path) else {
                server.close(id, code: 1008, reason: "unknown path")
                return
            }
            if intent == .pair && !codes.isActive {
                Console.warning("pairing attempt from \(remote) while no pairing code is active; refused")
                server.close(id, code: 1008, reason: "no pairing code active")
                return
            }
            machines[id] = ResponderMachine(intent: intent, context: context(), cipher: WebFront.cipher(for: id, on: server))
        case let .message(id, bytes):
            guard var machine = machines[id] else { return }
            let actions = machine.receive(bytes)
            machines[id] = machine
            perform(actions, on: id)
        case let .closed(id, _):
            Console.debug("connection \(id) closed" + (connectionDevice[id].map { " (device \($0))" } ?? ""))
            if let device = connectionDevice[id] { paused[device]?.remove(id) }
            machines[id] = nil
            connectionDevice[id] = nil
        }
    }

    func perform(_ actions: [ResponderMachine.Action], on id: WebSocketConnectionID) {
        // What the config handler wants sent when a session opens goes after this batch: the batch's frames were
        // encrypted first, and frames must leave in encryption order.
        var opening: [Message] = []
        defer { reply(opening, on: id) }
        for action in actions {
            switch action {
            case .send(let frame):
                server.send(frame, to: id)
            case let .authenticated(device, key):
                // The first transport message decrypted (not merely message 1, which a replay repeats).
                server.markAuthenticated(id)
                connectionDevice[id] = device
                try? peers.update(key: key) { $0.lastSeen = Date() }
                if let handler = options.configHandler {
                    let name = peers.peer(key: key)?.name ?? ""
                    opening += handler.sessionOpened(device: device, name: name)
                }
            case .consumePairingCode:
                codes.consume()
            case .pairingAttemptFailed:
                stats.pairingFailures += 1
                if codes.failed() {
                    Console.warning("pairing code revoked after \(SpeakBridgeProtocol.pairingMaxFailures) failed attempts; run `speakbridge pair` for a new one")
                }
            case .pairingConfirmed(let outcome):
                do {
                    let (kind, agent) = WebFront.kind(for: id, on: server)
                    try peers.upsert(Peer(name: outcome.peerName.isEmpty ? "device" : outcome.peerName,
                                          publicKey: outcome.peerKey, psk: outcome.sessionKey, role: .client,
                                          kind: kind, agent: agent))
                    Console.info("paired with \"\(outcome.peerName)\" (\(outcome.deviceID))")  // Console escapes it
                } catch {
                    Console.error("pairing with \(outcome.deviceID) could not be saved: \(error.description)", hint: error.hint)
                    server.close(id, code: 1011, reason: "cannot save pairing")
                }
            case let .deliver(device, session, chunks):
                deliver(device: device, session: session, chunks: chunks, on: id)
            case let .config(device, type, body):
                // Browser devices send dictation only: they may not pull or push config (WebFront.swift).
                let isBrowser = peers.all.first(where: { $0.id == device })?.kind == .browser
                guard let handler = options.configHandler, !isBrowser else {
                    reply([.error(code: ProtocolErrorCode.unknownType.rawValue,
                                  message: isBrowser ? "config transfer is off for browser devices"
                                      : "this desktop does not take config messages", expected: nil)], on: id)
                    continue
                }
                let name = peers.all.first { $0.id == device }?.name ?? ""
                reply(handler.handle(from: device, name: name, type: type, body: body), on: id)
            case .close(let reason):
                stats.countClose(reason: reason, wasAuthenticated: connectionDevice[id] != nil,
                                 pairingFailed: actions.contains { if case .pairingAttemptFailed = $0 { true } else { false } })
                Console.info("connection closed: \(reason)")
                server.close(id, code: 1000, reason: "")
                machines[id] = nil
            }
        }
    }

    func reply(_ messages: [Message], on id: WebSocketConnectionID) {
        guard !messages.isEmpty, var machine = machines[id] else { return }
        var actions: [ResponderMachine.Action] = []
        for message in messages { actions += machine.encryptAndSend(message) }
        machines[id] = machine
        perform(actions, on: id)
    }

    func deliver(device: DeviceID, session: String, chunks: [Chunk], on id: WebSocketConnectionID) {
        if pipeline.isOverflowing(device) {
            // Frames read before the pause took effect, or from yet another connection: not accepted (no ack), so
            // the client resends them after it reconnects. Closing keeps later chunks of this connection from
            // being taken as a forward jump.
            server.close(id, code: 1013, reason: "too much undelivered; try again later")
            machines[id] = nil
            return
        }
        let offer = ledgers[device, default: SessionLedger()].offer(session: session, chunks: chunks)
        if let refusal = offer.refusal {
            reply([.error(code: SessionLedger.Refusal.code, message: refusal.message, expected: nil)], on: id)
            return
        }
        for retirement in offer.retired { retire(device, retirement) }
        stats.duplicatesDropped += UInt64(offer.duplicates)
        if pipeline.submit(device: device, session: session, chunks: offer.accepted) == .pause {
            if paused[device]?.contains(id) != true {
                let backlog = pipeline.undelivered(device)
                Console.info("\(device): \(backlog.chunks) chunks (\(backlog.bytes) bytes) not yet in every sink; reading paused")
            }
            server.pauseReceiving(id)
            paused[device, default: []].insert(id)
        }
        if let ack = offer.immediateAck, var machine = machines[id] {
            let actions = machine.acknowledge(session: session, through: ack)
            machines[id] = machine
            perform(actions, on: id)
        }
    }

    /// The pipeline says `devices` fell to their low-water mark: read their connections again, unless one was
    /// throttled again meanwhile (then a later drain comes).
    func drained(_ devices: [DeviceID]) {
        for device in devices where !pipeline.isThrottled(device) {
            for id in paused.removeValue(forKey: device) ?? [] { server.resumeReceiving(id) }
        }
    }

    /// Drops a retired session's state outside the ledger: its pipeline levels and its per-sink progress (one
    /// line in the progress log records the retirement with its ack level instead).
    func retire(_ device: DeviceID, _ retirement: SessionLedger.Retirement) {
        pipeline.retire(.init(device: device, session: retirement.session))
        do {
            try progress.retire(device: device, session: retirement.session, delivered: retirement.delivered)
        } catch {
            // Not fatal: the session stays live in the log, which only means more state after a restart.
            Console.warning("cannot record a retired session: \(error.description)")
        }
    }

    /// Seeds every device's ledger from durable state: live sessions at their ack level, retired ones from the
    /// log; sessions beyond the live bound (a log written by an older desktop) are retired now.
    func restoreLedgers() {
        for (key, level) in pipeline.durableLevels() {
            ledgers[key.device, default: SessionLedger()].restore(session: key.session, delivered: level)
        }
        for (device, sessions) in progress.retiredEntries() {
            for (session, level) in sessions {
                ledgers[device, default: SessionLedger()].restoreRetired(session: session, delivered: level)
            }
        }
        for device in Array(ledgers.keys) {
            for retirement in ledgers[device]!.trim() { retire(device, retirement) }
        }
    }

    func durable(_ advanced: [(DeliveryPipeline.SessionKey, UInt64)]) {
        // One pass over the connections per batch (not per session): group the acks by device first.
        var acks: [DeviceID: [(String, UInt64)]] = [:]
        for (key, seq) in advanced {
            let before = ledgers[key.device]?.entry(key.session)?.delivered ?? 0
            guard ledgers[key.device]?.markDelivered(session: key.session, through: seq) == true else { continue }
            stats.chunksDelivered += seq - before
            acks[key.device, default: []].append((key.session, seq))
        }
        guard !acks.isEmpty else { return }
        for (id, device) in connectionDevice {
            guard let list = acks[device], var machine = machines[id], machine.isEstablished else { continue }
            var actions: [ResponderMachine.Action] = []
            for (session, seq) in list { actions += machine.acknowledge(session: session, through: seq) }
            machines[id] = machine
            perform(actions, on: id)
        }
    }

    /// Closes every live connection of a revoked device.
    /// Also drops its delivery state (ledger, pipeline levels, progress log): a revoked device keeps nothing here.
    func disconnect(_ device: DeviceID) {
        for (id, d) in connectionDevice where d == device {
            server.close(id, code: 1008, reason: "revoked")
            machines[id] = nil
            connectionDevice[id] = nil
        }
        paused[device] = nil
        ledgers[device] = nil
        pipeline.forget(device)
        do {
            try progress.forget(device: device)
        } catch {
            Console.warning("cannot drop the progress of a revoked device: \(error.description)")
        }
    }
}
