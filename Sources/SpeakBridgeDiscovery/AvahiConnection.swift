// One avahi-client connection that survives avahi-daemon being absent, restarting or crashing.
//
// Flow:
//   0. The owner (MDNSPublisher, MDNSBrowser) loads avahi first (LibAvahi) and hands in its function table;
//      without the library no connection is made.
//   1. init creates an AvahiThreadedPoll; start() makes the first AvahiClient and starts the
//      poll thread. From then on every avahi callback runs on that thread with its lock held.
//   2. Client RUNNING -> clientRunning(_:) (subclass publishes or browses).
//      Client REGISTERING/COLLISION (the daemon renames its host) -> clientNotReady(_:).
//   3. Client CONNECTING (bus up, daemon not running; only with AVAHI_CLIENT_NO_FAIL) or
//      FAILURE -> clientUnavailable(_:); the subclass forgets every object of that client.
//      On FAILURE the client is freed inside its own callback (its groups, browsers and resolvers
//      go with it) and a new one is made with NO_FAIL: at once after -23 "Daemon connection
//      failed" (the daemon went away and may come back), after `retryInterval` otherwise.
//   4. avahi_client_new itself failing (-26 "Daemon not running": no D-Bus system bus, or no
//      daemon without NO_FAIL) -> clientUnavailable(_:) and another try after `retryInterval`.
//   5. shutdown() (any thread but the poll thread; idempotent) stops and joins the poll thread,
//      then frees the client, the timers and the poll.
internal import CAvahi
import Glibc
import Synchronization

/// Base class of the publisher and browser cores.
///
/// Threading rule (why `@unchecked Sendable` is sound): before `start()` and after `shutdown()`
/// the stored state is touched only by the thread calling those; in between only on the poll
/// thread, where every avahi callback and timer runs. Other threads never touch it: what they
/// read is mirrored into a `Mutex` by the subclasses.
class AvahiConnection: @unchecked Sendable {
    let retryInterval: Duration
    /// avahi's functions (LibAvahi): every avahi call goes through this table.
    let avahi: sb_avahi_api
    private let poll: OpaquePointer?                // AvahiThreadedPoll*; nil only when out of memory
    private(set) var client: OpaquePointer?         // AvahiClient*
    private var timers: [PollTimer] = []
    private var reconnectTimer: PollTimer?
    private var insideClientNew = false
    private var started = false
    private(set) var isShutDown = false
    private let shutdownOnce = Atomic<Bool>(false)

    init(avahi: sb_avahi_api, retryInterval: Duration) {
        self.avahi = avahi
        self.poll = avahi.avahi_threaded_poll_new()
        self.retryInterval = retryInterval
    }

    deinit {
        tearDown()                                   // not shutdown(): no dynamic dispatch in deinit
    }

    /// Connects and starts the poll thread. With `failIfAbsent`, a daemon that cannot be reached
    /// right now is an error (nothing is started; call `shutdown()`); otherwise the connection
    /// waits for the daemon and the hooks report its absence.
    func start(failIfAbsent: Bool) -> DiscoveryError? {
        guard let poll else { return .avahi("cannot create avahi's event loop (out of memory)") }
        reconnectTimer = makeTimer { [unowned self] in reconnect() }
        let flags = failIfAbsent ? AvahiClientFlags(rawValue: 0) : AVAHI_CLIENT_NO_FAIL
        let error = connect(flags: flags)
        if error != 0 {
            let reason = unreachableReason(error)
            if failIfAbsent { return .noDaemon(reason) }
            clientUnavailable(reason)
            reconnectTimer?.arm(after: retryInterval)
        }
        guard avahi.avahi_threaded_poll_start(poll) >= 0 else {
            return .avahi("cannot start avahi's event loop thread")
        }
        started = true
        return nil
    }

    /// Stops the poll thread and frees everything. Idempotent. Never call it on the poll thread.
    /// Subclasses that override it call super.
    func shutdown() {
        tearDown()
    }

    private func tearDown() {
        guard !shutdownOnce.exchange(true, ordering: .acquiringAndReleasing) else { return }
        guard let poll else { return }
        if started {
            avahi.avahi_threaded_poll_lock(poll)
            isShutDown = true
            avahi.avahi_threaded_poll_unlock(poll)
            _ = avahi.avahi_threaded_poll_stop(poll)       // joins the poll thread
        }
        isShutDown = true
        if let client {
            avahi.avahi_client_free(client)                // also frees its groups, browsers, resolvers
            self.client = nil
        }
        for timer in timers { timer.free() }
        timers.removeAll()
        reconnectTimer = nil
        avahi.avahi_threaded_poll_free(poll)
    }

    // MARK: hooks for subclasses (poll thread, lock held)

    /// The client is connected and the daemon's host name is established: publish or browse now.
    func clientRunning(_ client: OpaquePointer) {}
    /// The daemon is (re)registering its host name; published entries must be reset and re-added
    /// once `clientRunning` is called again.
    func clientNotReady(_ client: OpaquePointer) {}
    /// No usable client: every group, browser and resolver made on the previous client is gone
    /// (or is freed right after this returns). Forget them.
    func clientUnavailable(_ reason: String) {}

    // MARK: services for subclasses

    /// A timer on the poll thread, disarmed until `arm(after:)`. Freed by `shutdown()`.
    func makeTimer(_ fire: @escaping () -> Void) -> PollTimer? {
        guard let poll, let api = avahi.avahi_threaded_poll_get(poll) else { return nil }
        let timer = PollTimer(avahi: avahi, api: api, fire: fire)
        timers.append(timer)
        return timer
    }

    func message(_ code: Int32) -> String {
        avahi.avahi_strerror(code).map { String(cString: $0) } ?? "error \(code)"
    }

    // MARK: internals

    private func connect(flags: AvahiClientFlags) -> Int32 {
        guard let poll else { return Int32(AVAHI_ERR_NO_MEMORY) }
        var error: Int32 = 0
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        insideClientNew = true
        // The state callback may run before avahi_client_new returns; it records the pointer.
        let made = avahi.avahi_client_new(avahi.avahi_threaded_poll_get(poll), flags, avahiClientCallback, userdata, &error)
        insideClientNew = false
        client = made
        return made == nil ? (error != 0 ? error : Int32(AVAHI_ERR_FAILURE)) : 0
    }

    private func reconnect() {
        guard !isShutDown, client == nil else { return }
        let error = connect(flags: AVAHI_CLIENT_NO_FAIL)
        if error != 0 {
            clientUnavailable(unreachableReason(error))
            reconnectTimer?.arm(after: retryInterval)
        }
    }

    fileprivate func clientStateChanged(_ client: OpaquePointer, _ state: AvahiClientState) {
        guard !isShutDown else { return }
        self.client = client
        switch state {
        case AVAHI_CLIENT_S_RUNNING:
            clientRunning(client)
        case AVAHI_CLIENT_S_REGISTERING, AVAHI_CLIENT_S_COLLISION:
            clientNotReady(client)
        case AVAHI_CLIENT_CONNECTING:
            clientUnavailable("avahi-daemon is not running (the D-Bus system bus is up); waiting for it to start")
        case AVAHI_CLIENT_FAILURE:
            let error = avahi.avahi_client_errno(client)
            let lost = error == Int32(AVAHI_ERR_DISCONNECTED)
            clientUnavailable(lost
                ? "lost the connection to avahi-daemon (\(message(error))); reconnecting"
                : "avahi-daemon failed: \(message(error)); retrying")
            if insideClientNew { return }            // avahi_client_new cleans up and returns NULL
            avahi.avahi_client_free(client)
            self.client = nil
            reconnectTimer?.arm(after: lost ? .zero : retryInterval)
        default:
            break
        }
    }

    private func unreachableReason(_ error: Int32) -> String {
        if error == Int32(AVAHI_ERR_NO_DAEMON) {
            return "cannot reach avahi-daemon over the D-Bus system bus (\(message(error)))"
        }
        return "cannot connect to avahi-daemon (\(message(error)))"
    }
}

/// Non-capturing trampoline: avahi hands back the AvahiConnection it was given as userdata.
private func avahiClientCallback(_ client: OpaquePointer?, _ state: AvahiClientState, _ userdata: UnsafeMutableRawPointer?) {
    guard let client, let userdata else { return }
    // Unretained: the connection outlives its client (shutdown frees the client first).
    Unmanaged<AvahiConnection>.fromOpaque(userdata).takeUnretainedValue().clientStateChanged(client, state)
}

/// A timeout on avahi's poll. Touched only on the poll thread, or before start / after the poll
/// thread was joined (see AvahiConnection's threading rule).
final class PollTimer {
    private let avahi: sb_avahi_api
    private let api: UnsafePointer<AvahiPoll>
    private var timeout: OpaquePointer?
    fileprivate let fire: () -> Void

    fileprivate init(avahi: sb_avahi_api, api: UnsafePointer<AvahiPoll>, fire: @escaping () -> Void) {
        self.avahi = avahi
        self.api = api
        self.fire = fire
        // A NULL time creates the timeout disarmed.
        timeout = api.pointee.timeout_new(api, nil, avahiTimerCallback, Unmanaged.passUnretained(self).toOpaque())
    }

    func arm(after delay: Duration) {
        guard let timeout else { return }
        var when = timeval()
        _ = avahi.avahi_elapse_time(&when, Self.milliseconds(delay), 0)
        api.pointee.timeout_update(timeout, &when)
    }

    func disarm() {
        guard let timeout else { return }
        api.pointee.timeout_update(timeout, nil)
    }

    fileprivate func free() {
        guard let timeout else { return }
        api.pointee.timeout_free(timeout)
        self.timeout = nil
    }

    static func milliseconds(_ d: Duration) -> UInt32 {
        let (seconds, attoseconds) = d.components
        let ms = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return UInt32(clamping: max(0, ms))
    }
}

private func avahiTimerCallback(_ timeout: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?) {
    guard let userdata else { return }
    let timer = Unmanaged<PollTimer>.fromOpaque(userdata).takeUnretainedValue()
    timer.disarm()                                   // one-shot: re-armed explicitly when needed
    timer.fire()
}
