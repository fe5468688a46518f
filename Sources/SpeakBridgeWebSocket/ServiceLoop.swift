// The service loop: one pthread that owns one lws_context.
//
// Flow:
// 1. `start()` creates the thread and waits until it has created the context (and, for a
//    server, bound the listening socket) or failed to.
// 2. The thread runs `lws_service` until a stop is requested and the connections have closed
//    (or the grace period ran out). Idle, it sleeps in poll(): lws wakes it only for socket
//    activity, its own timers (validity pings) and our one timer (`deadlineTimer`).
// 3. Commands reach the service thread through ONE FIFO, `inbox`, whichever thread issues
//    them (the service thread itself included, e.g. a send from inside an event handler). So
//    commands run in the order they were enqueued: a caller that encrypts and enqueues under
//    one lock of its own gets its frames on the wire in encryption order, whatever thread
//    each enqueue came from. Other threads never call lws except `lws_cancel_service`: when
//    they make the inbox non-empty they call it right after releasing the lock (counted in
//    `wakers`, so the context outlives the call), and lws then calls
//    LWS_CALLBACK_EVENT_WAIT_CANCELLED on the service thread.
// 4. The service thread drains the inbox when the outermost lws callback returns (every
//    callback, EVENT_WAIT_CANCELLED included), so lws is never re-entered from a handler and
//    a command issued on the service thread needs no wake-up (ServiceLoop+Callbacks.swift).
// 5. A TLS listener asked for at run time (`startSecure`, the browser route started on demand) is created by
//    `run()` between two `lws_service` calls, outside any lws callback; the asking thread waits for its result
//    (ServiceLoop+Secure.swift).
import Dispatch
import Synchronization
import SpeakBridgeSupport
internal import CLibWebSockets
#if canImport(Glibc)
import Glibc
#endif

/// Work handed to the service thread.
enum Command: Sendable {
    case send(WebSocketConnectionID, [UInt8])
    case close(WebSocketConnectionID, code: UInt16, reason: String)
    case markAuthenticated(WebSocketConnectionID, group: String?)
    /// Stops (false) or resumes (true) reading from a connection's socket (lws rx flow control).
    case setReceiving(WebSocketConnectionID, Bool)
    /// Client: reads the socket only when asked (`receivePending`) or lazy is off (ServiceLoop+LazyReceive.swift).
    case receiveLazily(WebSocketConnectionID, Bool)
    /// Client, lazy: reads what is waiting on the socket now, without sleeping for more.
    case receivePending(WebSocketConnectionID)
    case connect(WebSocketConnectionID, ConnectRequest)
    /// Creates the TLS listener now (ServiceLoop+Secure.swift); the result goes back through the request.
    case startSecure(SecureStartRequest)
    /// Adopts a descriptor to watch for readability (ServiceLoop+Watching.swift).
    case watch(WatchRequest)
    /// Arms the application's timer (ServiceLoop+Timer.swift).
    case schedule(TimerRequest)
    case stop
}

struct ConnectRequest: Sendable {
    var host: String
    var port: Int
    var path: String
    var subprotocol: String
    var timeoutSeconds: Int
}

enum Role: Sendable {
    case server(WebSocketServerConfiguration)
    case client(WebSocketClientConfiguration)
}

/// The application's event handler, wrapped so that it is stored as a value
/// (C-LIBRARY-NOTES §6.2).
struct EventSink: Sendable {
    let deliver: @Sendable (WebSocketEvent) -> Void
}

/// The context pointer as other threads see it. Why unchecked: they use it only for
/// `lws_cancel_service`, which lws documents as safe from any thread, and only after taking it
/// from the inbox under its lock while the service thread had not yet marked the inbox dead,
/// counted in `ServiceLoop.wakers` until the call returns (the service thread waits for that
/// count to reach 0 before it destroys the context).
struct ContextHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

struct Inbox: Sendable {
    var commands: [Command] = []
    /// Set once the context exists; cleared (under the lock) before it is destroyed.
    var context: ContextHandle?
}

/// Process-wide connection ID counter; 0 is never handed out (lws's opaque user data uses
/// a null pointer for "none").
private let connectionIDs = Atomic<UInt64>(0)

func makeConnectionID() -> WebSocketConnectionID {
    WebSocketConnectionID(rawValue: connectionIDs.add(1, ordering: .relaxed).newValue)
}

/// Owns the lws context and its thread. Shared between the public facade and the service
/// thread.
///
/// Why `@unchecked Sendable`: the `var`s below the "service thread only" mark are read and
/// written only on the service thread (inside lws callbacks or `run()`). Everything other
/// threads touch is `let`, a `Mutex` or an `Atomic`, or `inboxState`, only ever touched inside
/// `withInbox` (under `inboxLock`).
final class ServiceLoop: @unchecked Sendable {
    let role: Role
    let sink: EventSink
    let threadName: String

    /// Guards `inboxState`, the one `var` any thread touches (`withInbox`).
    private let inboxLock = ThreadLock()
    private var inboxState = Inbox()
    /// Whether `inboxState.commands` is non-empty, stored under `inboxLock` at every change, so that `drainInbox`
    /// skips the lock when there is nothing (the service thread's every callback exit: about 350 instructions a
    /// line). A false read is never a lost command: a command enqueued after it by another thread wakes the
    /// service thread (its store precedes that wake-up), and one enqueued on the service thread precedes its drain.
    let inboxHasCommands = Atomic<Bool>(false)
    /// The service thread's pthread_t, 0 before it runs; tells callers whether they are on it.
    private let servicePthread = Atomic<UInt>(0)
    /// The service thread's kernel thread id, for tests that read /proc.
    let serviceTID = Atomic<Int32>(0)
    /// Threads between taking the context from the inbox (under its lock) and returning from their
    /// `lws_cancel_service` (outside it). The service thread destroys the context only once this is 0 again.
    let wakers = Atomic<Int>(0)
    /// The TLS listener's port once bound (0: none). Written once on the service thread before `start` returns.
    let securePort = Atomic<Int>(0)
    /// Frames written at once, without the queue (`writeNow`), for tests.
    let directWrites = Atomic<Int>(0)
    /// Times the application's timer fired, for tests.
    let appTimerFires = Atomic<Int>(0)
    /// Connections `markAuthenticated` took out of the admission count so far, for tests (it is applied on the
    /// service thread, later than the call).
    let authenticatedMarks = Atomic<Int>(0)
    /// Why the application's timer fell back from its timerfd to an lws timer (nil: it did not), as logged.
    let appTimerFallbackReason = Locked<String?>(nil)
    /// Makes the application timer's timerfd (ServiceLoop+Timer.swift); tests pass one that fails.
    let appTimerSource: AppTimerSource
    /// Subprotocol, listener and user agent of each announced server connection, for other threads to read
    /// (written on the service thread before `.opened`, removed when the connection is forgotten).
    let connectionInfo = ConnectionInfoTable()
    /// The thread handle until someone joins (or detaches) it.
    private let joinHandle = Locked<pthread_t?>(nil)
    /// What the service thread's context creation came to (`run`), read by `awaitStart`. Not a
    /// `Locked<Result<Int, WebSocketError>?>`: making that type's metadata looks up `WebSocketError: Error` among every
    /// conformance record of the binary (about 0.15 M instructions), on the caller's thread as `send` starts.
    private let startup = Locked<StartupOutcome>(.pending)
    private let started = DispatchSemaphore(value: 0)

    enum StartupOutcome: Sendable {
        case pending
        case started(port: Int)
        case failed(WebSocketError)
    }

    // MARK: service thread only

    var context: OpaquePointer?
    var connections: [WebSocketConnectionID: Connection] = [:]
    /// Server connections lingering after their close frame (`closeAndLinger`), at most `maxLingering`.
    var lingering = 0
    /// Groups of connections sharing a queue bound, by name, while they have members (`markAuthenticated`).
    var outgoingGroups: [String: OutgoingGroup] = [:]
    /// The connection `connection(_:)` found last, while it is in `connections` (every removal goes through
    /// `removeConnection` or clears it): a paced line looks its connection up about four times.
    var lastFound: Connection?
    /// Descriptors watched for readability (ServiceLoop+Watching.swift).
    var watches: [WebSocketWatchID: Watch] = [:]
    /// The watch `watch(for:)` found last, while it is in `watches` (`removeWatch` and `forgetWatches` clear it).
    var lastWatch: Watch?
    /// Server: who holds the unauthenticated connections (TCP accepted, not yet authenticated).
    var admission: AdmissionControl<WebSocketConnectionID>
    var callbackDepth = 0
    /// The commands `drainInbox` is running (empty between drains; it swaps with the inbox's array).
    var drained: [Command] = []
    var stopRequested = false
    var stopDeadline: UInt64 = 0
    /// Memory lws keeps pointers to for the context's lifetime (C-LIBRARY-NOTES §1 pitfall 12).
    var protocols: UnsafeMutablePointer<lws_protocols>?
    /// Entries in `protocols`, the zeroed terminator included.
    var protocolCount = 0
    /// What the TLS vhost points at: its strings, file mount and header list (ServiceLoop+Secure.swift).
    var secureMemory: [SecureVhostMemory] = []
    var retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>?
    /// TLS listeners asked for at run time, created by `run()` after the current `lws_service` call.
    var pendingSecureStarts: [SecureStartRequest] = []
    /// Lazy connections reading for one loop turn (`receivePending`); paused again after it (`pauseAfterReadTurn`).
    var peeking: [Connection] = []
    var cStrings: [UnsafeMutablePointer<CChar>] = []
    /// The single lws_sul timer that fires at the earliest connection deadline.
    let deadlineTimer: UnsafeMutablePointer<swift_lws_timer>
    /// The application's timer (ServiceLoop+Timer.swift): a timerfd watched by the loop (-1 until first armed),
    /// and what it runs when it fires (nil: not armed).
    var appTimerFD: Int32 = -1
    var appTimerHandler: (@Sendable () -> Void)?
    /// The application's timer when its timerfd failed (`appTimerFallback`): an lws_sul timer.
    let appFallbackTimer: UnsafeMutablePointer<swift_lws_timer>
    var appTimerFallback = false
    /// Where a frame is assembled with LWS_PRE bytes of headroom before `lws_write`.
    var scratch: UnsafeMutableRawBufferPointer

    /// How long shutdown waits for close handshakes before destroying the context anyway.
    static let shutdownGraceNanoseconds: UInt64 = 1_000_000_000

    init(role: Role, sink: EventSink, threadName: String, timerSource: AppTimerSource = .standard) {
        self.role = role
        self.sink = sink
        self.threadName = threadName
        appTimerSource = timerSource
        switch role {
        case let .server(configuration):
            admission = AdmissionControl(maxTotal: configuration.maxUnauthenticated,
                                         maxPerAddress: configuration.maxUnauthenticatedPerAddress)
        case .client:
            admission = AdmissionControl(maxTotal: 1, maxPerAddress: 1)
        }
        deadlineTimer = .allocate(capacity: 1)
        deadlineTimer.initialize(to: swift_lws_timer())
        appFallbackTimer = .allocate(capacity: 1)
        appFallbackTimer.initialize(to: swift_lws_timer())
        scratch = .allocate(byteCount: Int(SWIFT_LWS_PRE) + 4096, alignment: 16)
        WebSocketLog.installHook()
    }

    deinit {
        // The service thread holds a strong reference while it runs, so this runs only after
        // it finished. If nobody joined it (stopped from an event handler), let it go.
        joinHandle.withLock { handle in
            if let thread = handle {
                pthread_detach(thread)
                handle = nil
            }
        }
        deadlineTimer.deinitialize(count: 1)
        deadlineTimer.deallocate()
        appFallbackTimer.deinitialize(count: 1)
        appFallbackTimer.deallocate()
        scratch.deallocate()
    }

    /// Runs `body` on the inbox with its lock held. Here rather than a `Locked`: this module's own specialized
    /// code, not a generic call into another module (about 350 instructions less per call; three calls a line).
    @inline(__always)
    func withInbox<R>(_ body: (inout Inbox) -> R) -> R {
        inboxLock.lock()
        defer { inboxLock.unlock() }
        return body(&inboxState)
    }

    // MARK: lifecycle (any thread)

    /// Starts the service thread; returns the listening port (0 for a client) once the
    /// context exists.
    func start() throws(WebSocketError) -> Int {
        try launch()
        return try awaitStart()
    }

    /// Creates the service thread without waiting for its context (`awaitStart` waits). Commands
    /// enqueued before the context exists are dropped, so nothing may be enqueued in between.
    func launch() throws(WebSocketError) {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        var thread = pthread_t()
        // The thread owns one retain of `self` until `run()` returns.
        let argument = Unmanaged.passRetained(self).toOpaque()
        let status = pthread_create(&thread, &attributes, serviceThreadEntry, argument)
        guard status == 0 else {
            Unmanaged<ServiceLoop>.fromOpaque(argument).release()
            throw .threadCreationFailed(status)
        }
        joinHandle.withLock { $0 = thread }
    }

    /// Waits until the thread `launch` created has its context (or failed to create it); the
    /// listening port (0 for a client). Any number of times, from any thread.
    func awaitStart() throws(WebSocketError) -> Int {
        Self.warmTableTypes()
        started.wait()
        started.signal()  // every later (or concurrent) caller gets through too
        switch startup.withLock({ $0 }) {
        case let .started(port):
            return port
        case let .failed(error):
            join()
            throw error
        case .pending:
            join()
            throw .contextCreationFailed("no result from service thread")
        }
    }

    /// Asks the loop to close everything and stop, then waits for the thread to finish.
    /// From the service thread itself it cannot wait: the loop stops after the current
    /// callback returns.
    func shutdown() {
        enqueue(.stop)
        if isServiceThread { return }
        join()
    }

    private func join() {
        // Holding the lock while joining makes concurrent callers wait for the same join.
        joinHandle.withLock { handle in
            if let thread = handle {
                pthread_join(thread, nil)
                handle = nil
            }
        }
    }

    var isServiceThread: Bool {
        servicePthread.load(ordering: .acquiring) == UInt(pthread_self())
    }

    /// Hands a command to the service thread, behind every command enqueued before it (from
    /// any thread). Dropped once the loop has stopped (then false).
    @discardableResult
    func enqueue(_ command: Command) -> Bool {
        let fromServiceThread = isServiceThread
        var queued = false
        let wake: ContextHandle? = withInbox { inbox in
            guard let context = inbox.context else { return nil }
            queued = true
            inbox.commands.append(command)
            inboxHasCommands.store(true, ordering: .releasing)
            // The service thread drains the inbox when its current callback returns, so it needs
            // no wake-up for its own commands. Another thread wakes it when the inbox becomes
            // non-empty; later commands ride on that wake-up (the drain takes the whole inbox,
            // and one that leaves commands behind wakes itself: `drainInbox`).
            guard !fromServiceThread && inbox.commands.count == 1 else { return nil }
            // Counted under the lock, while the context is known to be alive (see `run`).
            wakers.add(1, ordering: .relaxed)
            return context
        }
        // The wake-up goes out after the unlock: the service thread, woken, takes the inbox lock at once
        // to drain it, and found it still held (a futex wait and wake, and a context switch, per message).
        if let wake {
            lws_cancel_service(wake.pointer)
            wakers.subtract(1, ordering: .releasing)
        }
        return queued
    }

    /// `connections[id]`, the last one found without a hash.
    func connection(_ id: WebSocketConnectionID) -> Connection? {
        if let last = lastFound, last.id == id { return last }
        let found = connections[id]
        if found != nil { lastFound = found }
        return found
    }

    /// `connections[id] = nil`, forgetting it as the last one found too.
    func removeConnection(_ id: WebSocketConnectionID) {
        if let group = connections[id]?.group {
            connections[id]?.leaveGroup()
            if group.members == 0 { outgoingGroups[group.name] = nil }
        }
        connections[id] = nil
        if lastFound?.id == id { lastFound = nil }
    }

    /// `enqueue(.send(id, message))`, applied at once when that changes nothing: on the service thread, inside a
    /// callback (where the drain at its end would apply it), with no command queued or being drained ahead of it.
    /// A paced line read on the service thread (`send`'s stdin) goes out without the inbox's lock, the command's
    /// enum copies and the drain (about 1,000 instructions of its 18,000). Only on an established connection (or
    /// none): the caller may hold its own queue's lock, and on a connection still connecting a full queue closes it
    /// by `abandon`, which reports `.closed` at once — into that queue. Queued, it is reported from the drain.
    func send(_ message: [UInt8], on id: WebSocketConnectionID) {
        // `isServiceThread` first: the others are the service thread's own variables.
        if isServiceThread, callbackDepth > 0, drained.isEmpty, !inboxHasCommands.load(ordering: .acquiring),
           connection(id)?.isEstablished ?? true {
            applySend(message, on: id)
        } else {
            enqueue(.send(id, message))
        }
    }

    /// Makes the metadata of the service thread's two tables while the caller waits for the context anyway: the
    /// first `[WebSocketConnectionID: …]` and `[WebSocketWatchID: …]` of a process each make the Swift runtime check
    /// `Hashable` against every conformance record (~0.2 M instructions each). Made by the service thread at its
    /// first connection, that came after a `send`'s first dial was queued; every caller waits here before it
    /// enqueues anything (`launch`), so the service thread's first insert is a cache hit. Once per process.
    static func warmTableTypes() {
        _ = tableTypesWarmed
    }

    /// The capacities are returned (and kept) so that the optimizer cannot drop the two tables as unused.
    private static let tableTypesWarmed: Int = {
        var connections: [WebSocketConnectionID: Connection] = [:]
        connections.reserveCapacity(1)
        var watches: [WebSocketWatchID: Watch] = [:]
        watches.reserveCapacity(1)
        return connections.capacity + watches.capacity
    }()

    // MARK: the service thread

    fileprivate func run() {
        servicePthread.store(UInt(pthread_self()), ordering: .releasing)
        serviceTID.store(swift_gettid(), ordering: .relaxed)
        _ = threadName.withCString { swift_set_thread_name($0) }

        let created = createContext()
        guard case let .success((context, port)) = created else {
            if case let .failure(error) = created { startup.withLock { $0 = .failed(error) } }
            releaseContextMemory()
            started.signal()
            return
        }
        startup.withLock { $0 = .started(port: port) }
        self.context = context
        withInbox { $0.context = ContextHandle(pointer: context) }
        started.signal()
        while !(stopRequested && (connections.isEmpty || monotonicNanoseconds() >= stopDeadline)) {
            if lws_service(context, 0) < 0 {
                break
            }
            if !peeking.isEmpty {
                pauseAfterReadTurn()
            }
            if !pendingSecureStarts.isEmpty {
                createPendingSecureVhosts(context)
            }
        }

        let remaining = connections.values.sorted { $0.id.rawValue < $1.id.rawValue }
        connections.removeAll()
        lastFound = nil
        connectionInfo.withLock { $0.removeAll() }  // no `info(of:)` for a connection that is gone
        for connection in remaining {
            if let wsi = connection.wsi {
                lws_set_opaque_user_data(wsi, nil)
            }
            if connection.isAnnounced {
                emit(.closed(connection.id, reason: connection.closeReason ?? "shutdown"))
            }
        }
        let dropped: [Command] = withInbox { inbox in
            inbox.context = nil
            inboxHasCommands.store(false, ordering: .releasing)
            defer { inbox.commands.removeAll() }
            return inbox.commands
        }
        forgetWatches(dropped: dropped)
        // Whoever waits for a TLS listener hears that none will come.
        for case let .startSecure(request) in dropped { request.finish(.failure(.stopped)) }
        for request in pendingSecureStarts { request.finish(.failure(.stopped)) }
        pendingSecureStarts = []
        // A thread that took the context before it was cleared may still be inside `lws_cancel_service`
        // (`enqueue`): the context must outlive that call. No new waker can start now.
        while wakers.load(ordering: .acquiring) > 0 { sched_yield() }
        lws_sul_cancel(&deadlineTimer.pointee.sul)
        lws_sul_cancel(&appFallbackTimer.pointee.sul)
        appTimerHandler = nil
        // Nil first, so that nothing running inside the destroy (CLOSED callbacks) can use it.
        self.context = nil
        lws_context_destroy(context)
        releaseContextMemory()
        closeAppTimer()  // lws closed its copy with the context
    }

    // MARK: helpers used by the callbacks (service thread)

    func emit(_ event: WebSocketEvent) {
        sink.deliver(event)
    }

    /// Points the lws timer at the earliest pending deadline or validity refresh of a paused connection (or cancels
    /// it).
    func rescheduleDeadlineTimer() {
        guard let context else { return }
        var earliest = stopRequested ? stopDeadline : UInt64.max
        for connection in connections.values {
            if let deadline = connection.deadline, deadline < earliest {
                earliest = deadline
            }
            if let refresh = connection.validityRefresh, refresh < earliest {
                earliest = refresh
            }
        }
        if earliest == UInt64.max {
            lws_sul_cancel(&deadlineTimer.pointee.sul)
            return
        }
        let now = monotonicNanoseconds()
        let delayMicroseconds = earliest > now ? (earliest - now + 999) / 1000 : 0
        deadlineTimer.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        lws_sul_schedule(context, 0, &deadlineTimer.pointee.sul, deadlineTimerFired, lws_usec_t(delayMicroseconds))
    }
}

/// Nanoseconds on CLOCK_MONOTONIC.
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// pthread entry point. File-level so it captures nothing and is nonisolated
/// (C-LIBRARY-NOTES §1 pitfalls 9 and 10).
private func serviceThreadEntry(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    let loop = Unmanaged<ServiceLoop>.fromOpaque(argument!).takeRetainedValue()
    loop.run()
    return nil
}

/// lws_sul callback for the deadline timer.
private func deadlineTimerFired(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul, let owner = swift_lws_timer_owner(sul) else { return }
    // The loop outlives its context, and the timer is cancelled before the context dies.
    let loop = Unmanaged<ServiceLoop>.fromOpaque(owner).takeUnretainedValue()
    loop.withCallbackScope {
        loop.deadlinesPassed()
    }
}
