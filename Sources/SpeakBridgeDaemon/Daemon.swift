import FoundationEssentials
import SpeakBridgeControl
import SpeakBridgeCrypto
import SpeakBridgeDesktopCore
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore
import SpeakBridgeWebSocket
import SpeakBridgeSupport

/// `speakbridge serve`: the desktop. A shell around `DesktopCore`, which decides everything; this type only wires
/// the transport, the delivery pipeline, the files and the control socket to it.
///
/// Flow:
/// 1. Load the identity and paired devices, open the progress log, start the sinks (`DeliveryPipeline`), and
///    seed a `DesktopCore` with the paired devices and the durable ack levels; it lives in a `CoreDriver`, on
///    that driver's serial queue (`sb-core`).
/// 2. Listen for WebSockets (lws thread) on the native ws:// port. The browser route's HTTPS/WSS port (WebFront;
///    each connection's cipher and kind reach the core with its `connected` event) starts here only when a browser
///    device is paired, else at the first `pair --web`: without one the daemon never initialises OpenSSL. Each event
///    goes to the driver under its lock (run right on the lws thread when nobody else holds it): the core's actions there
///    are only non-blocking hand-ins — to lws (send, close, pause), to the pipeline (submit) and one-line appends to
///    the progress log.
/// 3. Blocking work — peers.json writes (fsynced; `sb-effects`) and the config handler (synchronous libsecret
///    D-Bus calls; `sb-config`) — runs on the driver's two effect queues; results come back to the core as events.
/// 4. The pipeline's callbacks (durable, drained) come back as events, asynchronously.
/// 5. The control socket (`status`, `pair`, `devices`, `revoke`) runs on its own threads: see DaemonControl.
// `@unchecked Sendable` is sound: every stored property is set once in init (or in `stop`, which runs once), and
// the mutable desktop state lives in `driver`, which is confined to its own queue.
public final class Daemon: @unchecked Sendable {
    let options: DaemonOptions
    /// flock on state/daemon.lock, held for the life of the process.
    let lockFD: Int32
    let identity: Identity
    let peers: PeerStore
    let progress: ProgressLog
    let startedAt = Date()
    let pipeline: DeliveryPipeline
    let driver: CoreDriver
    var server: WebSocketServer!
    var control: ControlServer!
    var discovery: DiscoveryService?
    /// The browser route: off with a reason, not started yet, or listening.
    let web: WebFront

    public init(options: DaemonOptions) throws {
        if let name = options.name, let problem = DaemonOptions.nameProblem(name) { throw DaemonNameError(description: problem) }
        self.options = options
        lockFD = try options.home.lockDaemon()
        identity = try Identity.loadOrCreate(options.home)
        peers = try PeerStore(home: options.home)
        progress = try ProgressLog(path: options.home.progressFile)
        let sinks = try options.sinks.map { spec throws(SinkError) in
            try SinkFactory.make(spec, sanitize: !options.raw, environment: ProcessInfo.processInfo.environment)
        }
        let name = options.name ?? "SpeakBridge \(identity.deviceID.compact.prefix(4))"
        let clients = peers.all.filter { $0.role == .client }
            .map { PairedClient(publicKey: $0.publicKey, name: $0.name, psk: $0.psk, kind: $0.kind) }
        let box = DriverBox()
        pipeline = DeliveryPipeline(sinks: sinks, progress: progress, onDurable: { advanced in
            let levels = advanced.map { SessionLevel(device: $0.0.device, session: $0.0.session, seq: $0.1) }
            box.driver?.postNow(.durable(levels))  // on the committer thread: no wake-up of another thread per ack
        }, onDrained: { devices in
            box.driver?.post(.drained(devices))
        }, onHeld: { sink, reason, held in
            // A sink holds chunks: the devices are told (`held`), only the kind of hold (`HeldReason`: the sink's
            // own reason names windows, files, keys held; it stays in the log and `status`); a cleared hold needs
            // no message (acks follow).
            guard let reason else { return }
            let levels = held.map { SessionLevel(device: $0.device, session: $0.session, seq: $0.firstHeldSeq) }
            box.driver?.post(.sinkHeld(sink: sink, reason: HeldReason.forDevices(reason), levels))
        })
        driver = CoreDriver(
            core: DesktopCore(configuration: .init(localStatic: identity.privateKey, localName: name,
                                                   takesConfig: options.configHandler != nil),
                              clients: clients, backlog: PipelineGauge(pipeline: pipeline)),
            pipeline: pipeline, progress: progress, peers: peers, configHandler: options.configHandler)
        box.driver = driver
        let live = pipeline.durableLevels().map { SessionLevel(device: $0.key.device, session: $0.key.session, seq: $0.value) }
        let retired = progress.retiredEntries().flatMap { device, sessions in
            sessions.map { SessionLevel(device: device, session: $0.key, seq: $0.value) }
        }
        driver.restore(live: live, retired: retired)
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
        // AESGCM on every listener where this CPU has AES-NI: browsers need it, and native clients offer it first
        // (it costs a third of ChaChaPoly's instructions a line); a client that offers only `speakbridge.v1` gets it.
        config.extraSubprotocols = NoiseCipher.aesGCM.isAvailable ? [SpeakBridgeProtocol.aesGCMSubprotocol] : []
        config.allowedPaths = Set(ConnectionIntent.allCases.map(\.path))
        config.maxMessageSize = SpeakBridgeProtocol.maxFrameSize
        config.handshakeTimeout = SpeakBridgeProtocol.handshakeTimeout
        config.maxUnauthenticated = SpeakBridgeProtocol.maxUnauthenticated
        config.maxUnauthenticatedPerAddress = SpeakBridgeProtocol.maxUnauthenticatedPerAddress
        web = WebFront.prepare(options, identity: identity)
        let driver = self.driver
        server = try driver.attach {
            try WebSocketServer(configuration: config) { event in driver.transport(event) }
        }
        // A paired browser's page reconnects at once after a restart; a failed start is logged and shown by
        // `status`, the native route runs on, and `pair --web` tries again.
        if web.isOffered, peers.all.contains(where: { $0.role == .client && $0.kind == .browser }) {
            web.start(on: server)
        }
        control = try ControlServer(path: options.home.controlSocket, typed: { [weak self] request in
            self?.answer(request) ?? .failure(ControlFailure("daemon is shutting down"))
        })
        if options.mdns {
            discovery = DiscoveryService(name: name, port: server.port, deviceID: identity.deviceID)
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
        driver.stopTicking()
        pipeline.stop()
        do {
            try progress.sync()  // a rewrite if an earlier sync failed (`ProgressLog.sync`)
        } catch {
            // Said, not dropped: what was delivered since the last good sync may be delivered again after a crash.
            Console.error("cannot make delivery progress durable at exit: \(PeerText.escape(error.description)); "
                          + "chunks delivered since the last sync may be delivered again after a crash of this machine",
                          hint: error.hint ?? "check the disk (dmesg)")
        }
        control.stop()
        discovery?.stop()
    }
}

/// Lets the pipeline's callbacks, created before the driver, reach it. Set in `Daemon.init` before the pipeline can
/// report anything (its first durable level or drain needs a submit, which comes from the driver).
// `@unchecked Sendable` is sound: `stored` is read and written only under `lock`.
final class DriverBox: @unchecked Sendable {
    private let lock = ThreadLock()
    private var stored: CoreDriver?
    var driver: CoreDriver? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

/// The pipeline's backlog, as the core looks it up (each call takes the pipeline's lock briefly).
struct PipelineGauge: BacklogGauge {
    let pipeline: DeliveryPipeline
    func isOverflowing(_ device: DeviceID) -> Bool { pipeline.isOverflowing(device) }
    func isThrottled(_ device: DeviceID) -> Bool { pipeline.isThrottled(device) }
    func undelivered(_ device: DeviceID) -> BacklogMeter.Level { pipeline.undelivered(device) }
}
