import Dispatch
import FoundationEssentials
import SpeakBridgeClientCore
import SpeakBridgeProtocol
import SpeakBridgeWebSocket
import SpeakBridgeSupport

/// `Candidate` lives in the core; clients of this module (the CLI, `ConfigExchange`) name it from here.
public typealias Candidate = SpeakBridgeClientCore.Candidate

/// The sockets of a client role: carries out a core's `dial`/`send`/`close` on libwebsockets and mDNS lookups,
/// and hands back what happened as events on `queue`. It decides nothing (`LinkCore` does).
///
/// `@unchecked Sendable`: every mutable member is read and written on `queue` only (a `LockedQueue`: socket events
/// come in through `queue.sync`, in place on the socket thread; mDNS results through `queue.async`; and the owner
/// calls in on `queue`); `client` is set once in `init` and is itself `Sendable`, which is all `shutdown` (called
/// off the queue) touches.
final class LinkDriver: @unchecked Sendable {
    enum Event {
        /// `subprotocol`: the one the desktop chose, which selects the Noise cipher (`LinkCore.opened`).
        case opened(AttemptID, subprotocol: String?)
        case frame(AttemptID, [UInt8])
        case closed(AttemptID, String)
        case found([Candidate])
    }

    let queue: LockedQueue
    var client: WebSocketClient!
    // Owned by `queue`: the owner's handler, the socket of each attempt and back, the mDNS browser.
    var onEvent: (Event) -> Void = { _ in }
    var sockets: [AttemptID: WebSocketConnectionID] = [:]
    var attempts: [WebSocketConnectionID: AttemptID] = [:]
    /// The pair of `sockets`/`attempts` used last (the chosen connection, once a session is up): a line's frame and
    /// its ack find it without hashing (two dictionary lookups cost about 400 instructions a paced line). Always an
    /// entry of both tables, or nil (cleared when its socket closes).
    var recent: (id: AttemptID, socket: WebSocketConnectionID)?
    var finder: DesktopFinder?
    /// The desktop of a `findDesktop` waiting for its grace period (see `mdnsGrace`); `findingStopped` after
    /// `stopFinding`.
    var pendingFind: DeviceID?
    var findingStopped = false
    var anyOpened = false

    /// How long a dial to the known addresses has before mDNS starts too. Browsing loads avahi-client (dlopen, about
    /// 20 libraries) and connects to the D-Bus system bus: work a `send --text` to a desktop that answers at its
    /// known address never needs (it is done well within this), and that used to delay its first dial. When every
    /// dial fails before any connection opened (the known addresses are stale), mDNS starts at once, so a desktop
    /// that moved is looked for without waiting out the grace.
    static let mdnsGrace: Duration = .milliseconds(300)

    /// - Parameter waitForContext: false: `ready()` must return before anything else is called (see
    ///   `WebSocketClient.init`), and the caller works meanwhile.
    init(queue: LockedQueue, waitForContext: Bool = true) throws {
        self.queue = queue
        client = try WebSocketClient(waitForContext: waitForContext) { [weak self] event in
            guard let self else { return }
            self.queue.sync { self.handle(event) }  // right here: no extra wake-up per frame
        }
    }

    /// Waits until the socket thread can take commands (after `init(waitForContext: false)`).
    func ready() throws { try client.ready() }

    /// Looks for the desktop by its ID over mDNS after `grace`, or as soon as every dial has failed without any
    /// connection opening, whichever comes first; what is found comes as `.found`. Must be called on `queue`.
    func findDesktop(_ desktop: DeviceID, after grace: Duration = LinkDriver.mdnsGrace) {
        guard finder == nil, pendingFind == nil, !findingStopped else { return }
        if grace <= .zero {
            startFinding(desktop)
            return
        }
        pendingFind = desktop
        queue.asyncAfter(grace) { [weak self] in self?.startPendingFind() }
    }

    /// Starts the waiting `findDesktop` now, if one still waits (its grace passed, or every dial failed).
    private func startPendingFind() {
        if let desktop = pendingFind { startFinding(desktop) }
    }

    private func startFinding(_ desktop: DeviceID) {
        pendingFind = nil
        guard finder == nil, !findingStopped else { return }
        finder = DesktopFinder(desktop: desktop, queue: queue) { [weak self] found in self?.onEvent(.found(found)) }
    }

    var isBrowsing: Bool { finder?.isBrowsing == true }

    func dial(_ id: AttemptID, _ candidate: Candidate, path: String, subprotocols: [String]) {
        let socket = client.connect(host: candidate.host, port: candidate.port, path: path,
                                    subprotocols: subprotocols, timeout: LinkCore.dialTimeout)
        sockets[id] = socket
        attempts[socket] = id
    }

    func send(_ frame: [UInt8], on id: AttemptID) {
        if let socket = socket(of: id) { client.send(frame, on: socket) }
    }

    func close(_ id: AttemptID) {
        if let socket = socket(of: id) { client.close(socket) }
    }

    /// `sockets[id]`, through `recent`.
    func socket(of id: AttemptID) -> WebSocketConnectionID? {
        if let recent, recent.id == id { return recent.socket }
        guard let socket = sockets[id] else { return nil }
        recent = (id, socket)
        return socket
    }

    /// `attempts[socket]`, through `recent`.
    func attempt(of socket: WebSocketConnectionID) -> AttemptID? {
        if let recent, recent.socket == socket { return recent.id }
        guard let id = attempts[socket] else { return nil }
        recent = (id, socket)
        return id
    }

    /// Reads attempt `id`'s frames only when asked (`receivePending`) while `lazy`
    /// (`WebSocketClient.receiveLazily`). Must be called on `queue`.
    func receiveLazily(_ id: AttemptID, _ lazy: Bool) {
        if let socket = socket(of: id) { client.receiveLazily(socket, lazy) }
    }

    /// Reads what attempt `id`'s socket holds now (`WebSocketClient.receivePending`). Must be called on `queue`.
    func receivePending(_ id: AttemptID) {
        if let socket = socket(of: id) { client.receivePending(socket) }
    }

    /// Stops mDNS (the core's `hangUp` closes the connections). Must be called on `queue`.
    func stopFinding() {
        findingStopped = true
        pendingFind = nil
        finder?.stop()
    }

    /// Calls `onReadable` on the socket thread whenever `fd` is readable (`WebSocketClient.watchReadable`); nil
    /// when `fd` cannot be watched (a regular file). Not on `queue`: it waits for the socket thread.
    func watchReadable(fd: Int32, onReadable: @escaping @Sendable (_ hungUp: Bool) -> Bool) -> WebSocketWatchID? {
        client.watchReadable(fd: fd, onReadable: onReadable)
    }

    /// `work` as the socket thread runs it: on `queue`, through `queue.sync` — right there, no thread woken. Made
    /// once and passed to `schedule` or `afterSends` as often as needed (a closure made per use costs a few
    /// allocations a line).
    func onQueue(_ work: @escaping () -> Void) -> @Sendable () -> Void {
        // Why the box: `work` runs on `queue` only (the `queue.sync` below), which is what this type's
        // `@unchecked Sendable` already rests on; the socket thread only hands it over.
        let box = QueueWork(run: work)
        return { [queue] in queue.sync { box.run() } }
    }

    /// Runs `fire` (from `onQueue`) once after `delay`, timed by the socket thread's loop
    /// (`WebSocketClient.schedule`): no dispatch timer thread, no worker woken. Scheduling again replaces a
    /// schedule that has not fired. Must be called on `queue`.
    func schedule(after delay: Duration, _ fire: @escaping @Sendable () -> Void) {
        client.schedule(after: delay, fire)
    }

    /// Runs `work` (from `onQueue`) once the frames sent before this call are written
    /// (`WebSocketClient.afterWrites`): in the same loop turn. Must be called on `queue`.
    func afterSends(_ work: @escaping @Sendable () -> Void) {
        client.afterWrites(work)
    }

    /// Drops a `schedule` that has not fired (`WebSocketClient.cancelSchedule`): the socket thread does not wake
    /// for it. Must be called on `queue`.
    func cancelSchedule() { client.cancelSchedule() }

    /// Joins the socket thread: no event comes after it. Not on `queue`.
    func shutdown() { client.shutdown() }

    func handle(_ event: WebSocketEvent) {
        switch event {
        case .opened(let socket, _, _):
            anyOpened = true
            if let id = attempts[socket] { onEvent(.opened(id, subprotocol: client.info(of: socket)?.subprotocol)) }
        case .message(let socket, let bytes):
            if let id = attempt(of: socket) { onEvent(.frame(id, bytes)) }
        case .closed(let socket, let reason):
            guard let id = attempts.removeValue(forKey: socket) else { return }
            sockets[id] = nil
            if recent?.socket == socket { recent = nil }
            if attempts.isEmpty, !anyOpened { startPendingFind() }  // every dial failed: look for the desktop now
            onEvent(.closed(id, reason))
        }
    }
}

/// A closure that runs on the driver's `queue` only, carried through the socket thread's timer.
/// `@unchecked Sendable`: the socket thread never calls it, it only passes it to `queue.sync`.
private struct QueueWork: @unchecked Sendable {
    let run: () -> Void
}
