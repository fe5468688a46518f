import Dispatch
import FoundationEssentials
import SpeakBridgeDelivery
import SpeakBridgeDesktopCore
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport
import SpeakBridgeWebSocket

/// Runs the `DesktopCore` under one lock and carries out its actions.
///
/// Threads: `queue` owns the core and everything below marked "on `queue`" (a `LockedQueue`: entered in place by
/// whoever runs the core — the lws thread for transport events, right there; the committer for acks; a control
/// request — while other threads hand events to its dispatch queue, sb-core, serial: `post`, in order; the clock's timer
/// enters it too). Why not `queue.sync` for the lws thread: see `LockedQueue`. Entering twice on one thread traps
/// (as `queue.sync` on its own queue did), never a silent deadlock. Blocking work goes to two serial
/// effect queues — `effects` (sb-effects: peers.json, fsynced) and `configCalls` (sb-config: the config module,
/// which may wait on the keyring over D-Bus, so a slow keyring never delays a pairing) — and its results come back
/// through `post`: nothing inside `queue` waits for a disk flush or for D-Bus. Config calls wait in `configWork`,
/// one FIFO per device (so a connection's messages are answered in order), served round robin (the sinks'
/// `FairQueue`): a device with many requests waiting (pulls on eight connections) delays another device's request
/// by the call running and at most one more of its own, not by all of them.
// `@unchecked Sendable` is sound: `core`, `server`, `ticker`, `armedFor` and `submittedOn` are read and written only
// inside `queue` (`queue.sync`, or a block on its dispatch queue; "on `queue`" below means that) — except
// `stopTicking`'s cancel of `ticker`, which `attach` set before, and cancelling a dispatch source is thread-safe; the
// other stored properties are immutable and themselves thread-safe (PeerStore, ProgressLog and DeliveryPipeline lock
// inside; the config handler is Sendable).
final class CoreDriver: @unchecked Sendable {
    private let queue = LockedQueue(label: "sb-core")
    let effects = DispatchQueue(label: "sb-effects")
    /// How long after a connection's handshake its device's "last seen" is written (`touchPeer`).
    static let lastSeenDelay: DispatchTimeInterval = .seconds(1)
    /// Runs config calls one at a time, each taken from `configWork` (`callConfig`). A revoke enters it directly
    /// (`sync`, DaemonControl): it runs after as many calls as were waiting, though not necessarily after every
    /// one of the revoked device (round robin); one of those run later finds the device unpaired and is refused.
    let configCalls = DispatchQueue(label: "sb-config")
    /// Config calls not yet run, per device (round robin).
    private let configWork = Locked(FairQueue<DeviceID, @Sendable () -> Void>())
    /// On `queue`.
    private var core: DesktopCore
    /// On `queue`; set by `attach` before the first transport event is handled.
    private var server: WebSocketServer?
    /// On `queue` (set up in `attach`); armed at `core.nextDeadline` only, so an idle daemon never wakes.
    private var ticker: DispatchSourceTimer?
    /// On `queue`: the deadline `ticker` is armed for (nil: disarmed).
    private var armedFor: Double?
    /// On `queue`: connections that have had chunks submitted; a connection's first submit is urgent (the
    /// pipeline fsyncs it without its pacing wait: a one-shot `send --text` waits for that ack).
    private var submittedOn = FirstSubmits()
    let pipeline: DeliveryPipeline
    let progress: ProgressLog
    let peers: PeerStore
    let configHandler: (any PeerConfigHandler)?

    init(core: DesktopCore, pipeline: DeliveryPipeline, progress: ProgressLog, peers: PeerStore,
         configHandler: (any PeerConfigHandler)?) {
        self.core = core
        self.pipeline = pipeline
        self.progress = progress
        self.peers = peers
        self.configHandler = configHandler
    }

    /// Creates the transport on `queue`, so an event it reports at once waits until it is stored here; sets up the
    /// clock that lets a pairing code expire on time (its secret is wiped then, not at the next attempt). The clock
    /// is armed only while the core has a deadline (`rearm`): idle, the daemon does not wake at all.
    func attach(_ make: () throws -> WebSocketServer) throws -> WebSocketServer {
        try queue.sync {
            let s = try make()
            self.server = s
            let timer = DispatchSource.makeTimerSource(queue: queue.dispatchQueue)
            timer.schedule(deadline: .distantFuture, repeating: .never)
            timer.setEventHandler { [weak self] in
                guard let self else { return }
                self.queue.sync {
                    self.armedFor = nil  // fired: arm again even if the deadline did not move (a clock step)
                    self.dispatch(.tick)
                }
            }
            timer.resume()
            ticker = timer
            rearm()
            return s
        }
    }

    func stopTicking() { ticker?.cancel() }  // set in attach (before any caller can get here); cancel is thread-safe

    /// On `queue`: points the clock at the core's next deadline (a little after it, so the core sees it passed),
    /// or nowhere. Touches the timer only when the deadline changed: nothing per frame.
    private func rearm() {
        let deadline = core.nextDeadline
        guard deadline != armedFor, let ticker else { return }
        armedFor = deadline
        if let deadline {
            let delay = max(0, deadline - Date().timeIntervalSince1970) + 0.05
            ticker.schedule(deadline: .now() + delay, repeating: .never, leeway: .milliseconds(50))
        } else {
            ticker.schedule(deadline: .distantFuture, repeating: .never)
        }
    }

    func restore(live: [SessionLevel], retired: [SessionLevel]) {
        queue.sync { perform(core.restore(live: live, retired: retired)) }
    }

    /// An lws event (on the lws thread).
    func transport(_ event: WebSocketEvent) {
        queue.sync {
            switch event {
            case let .opened(id, path, remote):
                // The cipher the subprotocol chose and the listener it came through (the browser route's TLS port).
                let route = server.map { WebFront.route(for: id, on: $0) } ?? .native
                dispatch(.connected(ConnectionID(id.rawValue), path: path, remote: remote, route: route))
            case let .message(id, bytes):
                Trace.mark("recv")
                dispatch(.frame(ConnectionID(id.rawValue), bytes))
            case let .closed(id, _):
                submittedOn.closed(ConnectionID(id.rawValue))
                dispatch(.closed(ConnectionID(id.rawValue)))
            }
        }
    }

    /// An event from any other thread: handled later, in order, on `queue`.
    func post(_ event: DesktopEvent) {
        queue.async { self.dispatch(event) }
    }

    /// An event from a thread that the core's holders never wait for (the pipeline's committer): handled on the
    /// calling thread as soon as the lock is free — no thread wake-up per ack, unlike `post`.
    func postNow(_ event: DesktopEvent) {
        queue.sync { dispatch(event) }
    }

    /// Runs `read` on the core, on `queue` (for `status`: a snapshot, no actions).
    func read<T>(_ read: (DesktopCore) -> T) -> T {
        queue.sync { read(core) }
    }

    /// Handles an event now and waits until its actions are carried out (control requests).
    func send(_ event: DesktopEvent) {
        queue.sync { dispatch(event) }
    }

    /// On `queue`.
    private func dispatch(_ event: DesktopEvent) {
        perform(core.handle(event, now: Date().timeIntervalSince1970))
        if case .durable(let levels) = event { Trace.mark("ack", levels.reduce(0) { max($0, $1.seq) }) }  // no array per ack
        rearm()
    }

    /// On `queue`: carries out the core's actions, in order.
    private func perform(_ actions: [DesktopAction]) {
        for action in actions {
            switch action {
            case let .send(id, frame):
                server?.send(frame, to: Self.transportID(id))
            case let .close(id, reason):
                let (code, text) = reason.closeCode
                server?.close(Self.transportID(id), code: code, reason: text)
            case let .markAuthenticated(id, device):
                // A device's connections share one send-queue bound (`maxQueuedBytesPerGroup`): a device that
                // reads none of its replies on its 8 connections holds 16 MiB of the daemon's memory, not 8 × 16.
                server?.markAuthenticated(Self.transportID(id), group: device.description)
            case .pauseReading(let id):
                server?.pauseReceiving(Self.transportID(id))
            case .resumeReading(let id):
                server?.resumeReceiving(Self.transportID(id))
            case let .submit(id, device, session, chunks):
                Trace.mark("ledger", chunks.last?.seq ?? 0)
                // The pipeline answers at once (a lock, no wait); a pause is handed back to the core now, before
                // the next frame of this connection can be read.
                let first = submittedOn.isFirst(id)
                let pressure = pipeline.submit(device: device, session: session, chunks: chunks,
                                               name: pipeline.showsDeviceNames ? core.clients.name(of: device) : nil,
                                               urgent: first)
                if pressure == .pause { dispatch(.pressure(id, device, pressure)) }
            case let .retire(device, retirement):
                retire(device, retirement)
            case .forgetDelivery(let device):
                forget(device)
            case let .persistPeer(id, outcome, name, kind, agent):
                persist(id, outcome, name: name, kind: kind, agent: agent)
            case .touchPeer(let key):
                // "Last seen" (peers.json, two fsyncs) only when it would change (at most once a minute), and a
                // second later: a worker woken for nothing on every connection, or the write beside the handshake's
                // `resume` and the first line, cost a cold first line time (README → Experiments). A device
                // revoked meanwhile stays revoked: `seen` changes only a peer that is in the list.
                if peers.wouldRecord(key: key) {
                    effects.asyncAfter(deadline: .now() + Self.lastSeenDelay) { [peers] in
                        Trace.mark("seen")
                        _ = try? peers.seen(key: key)
                    }
                }
            case let .configOpened(id, device, name):
                guard let handler = configHandler else { continue }
                callConfig(for: device) { [self] in post(.configReplies(id, handler.sessionOpened(device: device, name: name))) }
            case let .configRequest(id, device, name, type, body):
                guard let handler = configHandler else { continue }
                callConfig(for: device) { [self] in
                    post(.configReplies(id, handler.handle(from: device, name: name, type: type, body: body)))
                }
            case .log(let line):
                Self.log(line)
            }
        }
    }

    /// Queues a config call of `device` and one turn of `configCalls`, which runs the call whose turn it is (round
    /// robin over devices, `FairQueue`) — not necessarily this one: every turn runs one call, so all run.
    private func callConfig(for device: DeviceID, _ call: @escaping @Sendable () -> Void) {
        configWork.withLock { $0.append(device, CollectionOfOne(call)) }
        configCalls.async { [configWork] in
            let next = configWork.withLock { queue -> (@Sendable () -> Void)? in
                guard let (device, calls) = queue.next(limit: 1, budget: 1, weight: { _ in 1 }) else { return nil }
                queue.consume(device, taken: calls.count, of: calls.count)
                return calls.first
            }
            next?()
        }
    }

    static func transportID(_ id: ConnectionID) -> WebSocketConnectionID { WebSocketConnectionID(rawValue: id.rawValue) }

    static func log(_ line: LogLine) {
        switch line.level {
        case .debug: Console.debug(line.message)
        case .info: Console.info(line.message)
        case .warning: Console.warning(line.message)
        case .error: Console.error(line.message, hint: line.hint)
        }
    }

    /// Saves a confirmed pairing (an fsynced write of peers.json) on `effects`; the core sends `paired` once it
    /// hears it is saved.
    private func persist(_ id: ConnectionID, _ outcome: PairingOutcome, name: String, kind: DeviceKind, agent: String?) {
        effects.async { [self] in
            do throws(StoreError) {
                try peers.upsert(Peer(name: name, publicKey: outcome.peerKey, psk: outcome.sessionKey, role: .client,
                                      kind: kind, agent: agent))
                post(.pairingSaved(id, outcome, kind: kind))
            } catch {
                post(.pairingNotSaved(id, outcome, message: error.description, hint: error.hint))
            }
        }
    }

    /// Drops a retired session's state outside the ledger: its pipeline levels and its per-sink progress (one
    /// line in the progress log records the retirement with its ack level instead). On `queue`, not `effects`:
    /// it is one write(2) without fsync, and it must be in the log before any later chunk of that session is.
    private func retire(_ device: DeviceID, _ retirement: SessionLedger.Retirement) {
        do {
            try pipeline.retire(.init(device: device, session: retirement.session), delivered: retirement.delivered)
        } catch {
            // Not fatal: the session stays live in the log, which only means more state after a restart.
            Console.warning("cannot record a retired session: \(error.description)")
        }
    }

    /// A revoked device's delivery state goes (pipeline levels, progress log: one write(2), as for `retire`).
    private func forget(_ device: DeviceID) {
        pipeline.forget(device)  // its levels and its progress in the log
    }
}
