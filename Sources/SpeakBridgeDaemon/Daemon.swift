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

    // Owned by `queue`.
    var machines: [WebSocketConnectionID: ResponderMachine] = [:]
    var connectionDevice: [WebSocketConnectionID: DeviceID] = [:]
    var ledgers: [DeviceID: SessionLedger] = [:]
    var stats = Stats()

    struct Stats {
        var chunksDelivered: UInt64 = 0
        var duplicatesDropped: UInt64 = 0
        var rejectedConnections: UInt64 = 0
    }

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
        pipeline = DeliveryPipeline(sinks: sinks, progress: progress) { [weak self] advanced in
            guard let self else { return }
            self.queue.async { self.durable(advanced) }
        }
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
        // `queue.sync` from the lws thread: when the queue is idle the handler runs right on the lws thread
        // (no wake-up of another thread per frame); the critical sections are short and never wait on lws.
        server = try WebSocketServer(configuration: config) { [weak self] event in
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
                return try? SymmetricKey(bytes: peer.psk)
            },
            delivered: { [unowned self] device, session in
                ledgerDelivered(device, session)
            })
    }

    func ledgerDelivered(_ device: DeviceID, _ session: String) -> UInt64 {
        if let entry = ledgers[device]?.entry(session) { return entry.delivered }
        let level = pipeline.delivered(.init(device: device, session: session))
        ledgers[device, default: SessionLedger()].restore(session: session, delivered: level)
        return level
    }

    func handle(_ event: WebSocketEvent) {
        switch event {
        case let .opened(id, path, remote):
            guard let intent = ConnectionIntent(path: path) else {
                server.close(id, code: 1008, reason: "unknown path")
                return
            }
            if intent == .pair && !codes.isActive {
                Console.warning("pairing attempt from \(remote) while no pairing code is active; refused")
                server.close(id, code: 1008, reason: "no pairing code active")
                return
            }
            machines[id] = ResponderMachine(intent: intent, context: context())
        case let .message(id, bytes):
            guard var machine = machines[id] else { return }
            let actions = machine.receive(bytes)
            machines[id] = machine
            perform(actions, on: id)
        case let .closed(id, _):
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
                stats.rejectedConnections += 1
                if codes.failed() {
                    Console.warning("pairing code revoked after \(SpeakBridgeProtocol.pairingMaxFailures) failed attempts; run `speakbridge pair` for a new one")
                }
            case .pairingConfirmed(let outcome):
                do {
                    try peers.upsert(Peer(name: outcome.peerName.isEmpty ? "device" : outcome.peerName,
                                          publicKey: outcome.peerKey, psk: outcome.sessionPSK, role: .client))
                    Console.info("paired with \"\(outcome.peerName)\" (\(outcome.deviceID))")  // Console escapes it
                } catch {
                    Console.error("pairing with \(outcome.deviceID) could not be saved: \(error.description)", hint: error.hint)
                    server.close(id, code: 1011, reason: "cannot save pairing")
                }
            case let .deliver(device, session, chunks):
                deliver(device: device, session: session, chunks: chunks, on: id)
            case let .config(device, type, body):
                guard let handler = options.configHandler else {
                    reply([.error(code: ProtocolErrorCode.unknownType.rawValue,
                                  message: "this desktop does not take config messages", expected: nil)], on: id)
                    continue
                }
                let name = peers.all.first { $0.id == device }?.name ?? ""
                reply(handler.handle(from: device, name: name, type: type, body: body), on: id)
            case .close(let reason):
                stats.rejectedConnections += 1
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
        _ = ledgerDelivered(device, session)  // seeds the ledger from durable state
        let offer = ledgers[device, default: SessionLedger()].offer(session: session, chunks: chunks)
        stats.duplicatesDropped += UInt64(offer.duplicates)
        pipeline.submit(device: device, session: session, chunks: offer.accepted)
        if let ack = offer.immediateAck, var machine = machines[id] {
            let actions = machine.acknowledge(session: session, through: ack)
            machines[id] = machine
            perform(actions, on: id)
        }
    }

    func durable(_ advanced: [(DeliveryPipeline.SessionKey, UInt64)]) {
        for (key, seq) in advanced {
            let before = ledgers[key.device]?.entry(key.session)?.delivered ?? 0
            ledgers[key.device, default: SessionLedger()].markDelivered(session: key.session, through: seq)
            stats.chunksDelivered += seq > before ? seq - before : 0
            for (id, device) in connectionDevice where device == key.device {
                guard var machine = machines[id], machine.isEstablished else { continue }
                let actions = machine.acknowledge(session: key.session, through: seq)
                machines[id] = machine
                perform(actions, on: id)
            }
        }
    }

    /// Closes every live connection of a revoked device.
    func disconnect(_ device: DeviceID) {
        for (id, d) in connectionDevice where d == device {
            server.close(id, code: 1008, reason: "revoked")
            machines[id] = nil
            connectionDevice[id] = nil
        }
    }
}
