import SpeakBridgeSupport

/// WebSocket client connections (libwebsockets) on one dedicated thread, named
/// "sb-ws-client". One client can hold several connections at once, e.g. to try several
/// addresses of the same peer in parallel.
///
/// Every method is safe to call from any thread, including from inside `onEvent`.
///
/// `onEvent` is called on the client's service thread, one event at a time, in order.
/// **It must not block**: while it runs, no connection of this client makes progress.
///
/// Lifetime, send queues and the process-wide SIGPIPE side effect are as described for
/// ``WebSocketServer``: call ``shutdown()`` when done.
public final class WebSocketClient: Sendable {
    let loop: ServiceLoop

    /// - Parameter waitForContext: false returns as soon as the service thread exists, so the caller can do other
    ///   work while it creates its libwebsockets context; ``ready()`` must then return before anything else is
    ///   called (until then `connect`, `send` and `close` would be dropped).
    public convenience init(
        configuration: WebSocketClientConfiguration = WebSocketClientConfiguration(),
        waitForContext: Bool = true,
        onEvent: @escaping @Sendable (WebSocketEvent) -> Void
    ) throws {
        try self.init(configuration: configuration, waitForContext: waitForContext, timerSource: .standard,
                      onEvent: onEvent)
    }

    /// - Parameter timerSource: makes the ``schedule(after:_:)`` timer's timerfd; tests pass one that fails.
    init(
        configuration: WebSocketClientConfiguration = WebSocketClientConfiguration(),
        waitForContext: Bool = true,
        timerSource: AppTimerSource,
        onEvent: @escaping @Sendable (WebSocketEvent) -> Void
    ) throws {
        try configuration.validate()
        loop = ServiceLoop(role: .client(configuration), sink: EventSink(deliver: onEvent), threadName: "sb-ws-client",
                           timerSource: timerSource)
        try loop.launch()
        if waitForContext { try ready() }
    }

    deinit {
        shutdown()
    }

    /// Waits until the service thread has its context; throws if it could not create one. Idempotent.
    public func ready() throws {
        _ = try loop.awaitStart()
    }

    /// Starts connecting to `ws://host:port/path` offering `subprotocol`. The result arrives
    /// as `.opened` or `.closed` for the returned ID; `.closed` comes after at most `timeout`
    /// seconds (TCP connect plus WebSocket upgrade) if the server does not answer.
    ///
    /// `host` should be an IP literal: this libwebsockets build resolves names with blocking
    /// getaddrinfo on the service thread. Messages sent before `.opened` are queued.
    /// After ``shutdown()`` the returned ID never produces an event.
    public func connect(
        host: String, port: Int, path: String,
        subprotocol: String = "speakbridge.v1", timeout: Int = 5
    ) -> WebSocketConnectionID {
        connect(host: host, port: port, path: path, subprotocols: [subprotocol], timeout: timeout)
    }

    /// `connect` offering several subprotocols, preferred first (one `Sec-WebSocket-Protocol` list). The server
    /// picks one; lws refuses an answer that is not among them, and ``info(of:)`` tells which it was once
    /// `.opened` has come.
    public func connect(
        host: String, port: Int, path: String, subprotocols: [String], timeout: Int = 5
    ) -> WebSocketConnectionID {
        let id = makeConnectionID()
        let request = ConnectRequest(host: host, port: port, path: path,
                                     subprotocol: subprotocols.joinedPlain(separator: ", "), timeoutSeconds: timeout)
        loop.enqueue(.connect(id, request))
        return id
    }

    /// The subprotocol the server chose for an open connection (from its `101`); nil before `.opened` and once the
    /// connection is closed. (`isSecure` and `userAgent` say nothing on a client.)
    public func info(of connection: WebSocketConnectionID) -> WebSocketConnectionInfo? {
        loop.connectionInfo.withLock { $0[connection] }
    }

    /// Queues one binary message; order is preserved per connection.
    public func send(_ message: [UInt8], on connection: WebSocketConnectionID) {
        loop.send(message, on: connection)
    }

    /// Closes a connection with a status code (1000...4999) after the messages already
    /// queued for it; a connection attempt still in progress is abandoned.
    public func close(_ connection: WebSocketConnectionID, code: UInt16 = 1000, reason: String = "") {
        loop.enqueue(.close(connection, code: code, reason: reason))
    }

    /// Calls `onReadable` on the service thread whenever `fd` is readable, so that input read there and sent from
    /// there goes out in the same loop iteration without waking another thread.
    ///
    /// `onReadable(false)`: poll said `fd` is readable; it makes **one** `read` (a second one could block) and
    /// returns false to end the watch, which it must do once `read` returned 0 (an ended input — a tty after
    /// Ctrl-D, a shut-down socket — stays readable). On a hang-up (a pipe whose writers all closed) lws ends the
    /// watch itself and calls `onReadable(true)` once: it reads what is left, to the end (no read blocks then).
    /// Calls it makes on this client (``send(_:on:)`` and the rest) take effect when it returns, before the loop
    /// polls again. It must not block for long, like `onEvent`.
    ///
    /// The client watches a duplicate of `fd`; the caller keeps `fd` open. Returns nil when `fd` cannot be
    /// watched: not a pipe, FIFO, socket or character device (regular files always poll readable: read them on a
    /// thread of your own), or the client is shut down. Waits for the service thread when called from another one.
    public func watchReadable(fd: Int32, onReadable: @escaping @Sendable (_ hungUp: Bool) -> Bool) -> WebSocketWatchID? {
        loop.watchReadable(fd: fd, handler: ReadableHandler(call: onReadable))
    }

    /// Closes all connections and joins the service thread. Idempotent. No events are
    /// delivered after it returns (except when called from inside `onEvent`; see
    /// ``WebSocketServer/shutdown()``).
    public func shutdown() {
        // A stop enqueued before the context exists would be dropped, and the join would wait forever.
        _ = try? loop.awaitStart()
        loop.shutdown()
    }

    /// Runs `fire` once on the service thread after `delay` (a timerfd the loop polls with its sockets: no other
    /// thread is woken; if the timerfd cannot be made or armed, an lws timer, with one warning on `WebSocketLog`).
    /// One timer per client: scheduling again replaces a schedule that has not fired yet. Calls `fire` makes on
    /// this client take effect when it returns, before the loop polls again. Called on the service thread (from an
    /// event, a watch or `fire` itself) it needs no wake-up; from another thread it wakes the loop once. Dropped once
    /// the client is shut down. `fire` must not block for long, like `onEvent`.
    public func schedule(after delay: Duration, _ fire: @escaping @Sendable () -> Void) {
        let (seconds, attoseconds) = delay.components
        let microseconds = seconds <= 0 ? UInt64(attoseconds > 0 ? attoseconds / 1_000_000_000_000 : 0)
            : UInt64(min(seconds, 86_400)) * 1_000_000 + UInt64(attoseconds / 1_000_000_000_000)
        loop.enqueue(.schedule(TimerRequest(delayMicroseconds: microseconds, fire: fire)))
    }

    /// Times a ``schedule(after:_:)`` timer fired, for tests.
    package var timerFireCount: Int {
        loop.appTimerFires.load(ordering: .relaxed)
    }

    /// The warning logged when the ``schedule(after:_:)`` timer fell back to an lws timer (nil: it did not).
    package var timerFallbackReason: String? {
        loop.appTimerFallbackReason.withLock { $0 }
    }

    /// Stops reading from a connection's socket until ``resumeReceiving(_:)`` (lws rx flow control), so that the
    /// server's frames back up in the kernel's buffers and then in its queue; for tests of the server's sending.
    package func pauseReceiving(_ connection: WebSocketConnectionID) {
        loop.enqueue(.setReceiving(connection, false))
    }

    /// Resumes reading after ``pauseReceiving(_:)``.
    package func resumeReceiving(_ connection: WebSocketConnectionID) {
        loop.enqueue(.setReceiving(connection, true))
    }

    /// Frames written in the loop turn that sent them, without waiting for a WRITEABLE callback (nothing was
    /// queued ahead of them), for tests.
    package var directWriteCount: Int {
        loop.directWrites.load(ordering: .relaxed)
    }

    /// The kernel thread id of the service thread, for tests.
    package var serviceThreadID: Int32 {
        loop.serviceTID.load(ordering: .relaxed)
    }
}
