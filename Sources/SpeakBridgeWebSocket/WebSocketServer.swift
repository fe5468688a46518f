/// A WebSocket server (libwebsockets) on one dedicated thread, named "sb-ws-server".
///
/// Accepts binary messages only, on the configured paths and subprotocol. Every method is
/// safe to call from any thread, including from inside `onEvent`.
///
/// `onEvent` is called on the server's service thread, one event at a time, in order.
/// **It must not block**: while it runs, no connection of this server makes progress.
/// Hand work to another thread or task (an `AsyncStream` continuation works well).
///
/// Lifetime: call ``shutdown()`` when done. The service thread keeps the server's internals
/// alive, so an `onEvent` closure that captures the server strongly keeps both alive until
/// ``shutdown()``.
///
/// Sending: each connection has an unbounded queue in front of the socket. A peer that stops
/// reading stops answering PINGs too, so it is dropped after `hangupAfter` seconds; until
/// then its queue grows with whatever is sent to it.
///
/// Process-wide side effect: creating a server or a client makes the whole process ignore
/// SIGPIPE (libwebsockets' `lws_create_context` sets SIG_IGN and never restores it).
/// Writes to a closed pipe or FIFO then fail with EPIPE instead of killing the process, and
/// child processes inherit the ignored signal across exec unless the spawner resets it.
public final class WebSocketServer: Sendable {
    let loop: ServiceLoop

    /// The port the server is listening on (the ephemeral one if the configuration said 0).
    public let port: Int

    /// Starts the service thread and returns once the server is listening.
    /// Throws ``WebSocketError/bindFailed(host:port:reason:)`` when the address cannot be bound.
    public init(
        configuration: WebSocketServerConfiguration,
        onEvent: @escaping @Sendable (WebSocketEvent) -> Void
    ) throws {
        try configuration.validate()
        loop = ServiceLoop(role: .server(configuration), sink: EventSink(deliver: onEvent), threadName: "sb-ws-server")
        port = try loop.start()
    }

    deinit {
        loop.shutdown()
    }

    /// Queues one binary message. Messages to one connection go out in the order of these
    /// calls. Ignored if the connection is closed or closing.
    public func send(_ message: [UInt8], to connection: WebSocketConnectionID) {
        loop.send(message, on: connection)
    }

    /// Lifts the handshake timeout for a connection and stops counting it towards
    /// `maxUnauthenticated` / `maxUnauthenticatedPerAddress` (so it can no longer be evicted).
    /// Call it once the application-level handshake succeeded. Until then a connection counts
    /// as unauthenticated from its TCP accept on, and may be evicted (`.closed` with reason
    /// "evicted: too many unauthenticated connections") when the server is full.
    /// `group`: the peer's name for ``WebSocketServerConfiguration/maxQueuedBytesPerGroup`` (the daemon: its device
    /// ID); connections marked with the same group share that bound. nil: the connection's own bound only.
    public func markAuthenticated(_ connection: WebSocketConnectionID, group: String? = nil) {
        loop.enqueue(.markAuthenticated(connection, group: group))
    }

    /// Backpressure: stops reading from a connection's socket until ``resumeReceiving(_:)``. The peer's
    /// sends then stall in the kernel's buffers (TCP flow control), so it cannot make this process buffer
    /// more. Events already read may still arrive. Ignored for unknown connections.
    /// Its PONGs are not read either, so while paused the connection is never hung up for want of a sign of life
    /// (`hangupAfter`); from ``resumeReceiving(_:)`` on it has the full `hangupAfter` again.
    public func pauseReceiving(_ connection: WebSocketConnectionID) {
        loop.enqueue(.setReceiving(connection, false))
    }

    /// Resumes reading after ``pauseReceiving(_:)``.
    public func resumeReceiving(_ connection: WebSocketConnectionID) {
        loop.enqueue(.setReceiving(connection, true))
    }

    /// Closes a connection with a status code (1000...4999) after the messages already
    /// queued for it. The reason is cut to 123 bytes. `.closed` follows.
    public func close(_ connection: WebSocketConnectionID, code: UInt16 = 1000, reason: String = "") {
        loop.enqueue(.close(connection, code: code, reason: reason))
    }

    /// Closes all connections (1001, waiting up to a second for the peers), stops listening
    /// and joins the service thread. Idempotent. No events are delivered after it returns.
    /// Called from inside `onEvent` it cannot wait: the server then stops right after the
    /// handler returns.
    public func shutdown() {
        loop.shutdown()
    }

    /// The TLS listener's port (the ephemeral one if its configuration said 0), or nil without one.
    public var securePort: Int? {
        let port = loop.securePort.load(ordering: .acquiring)
        return port == 0 ? nil : port
    }

    /// Subprotocol, listener and user agent of an open connection (nil once it is closed).
    public func info(of connection: WebSocketConnectionID) -> WebSocketConnectionInfo? {
        loop.connectionInfo.withLock { $0[connection] }
    }

    /// How many ``markAuthenticated(_:)`` calls have taken effect (on the service thread), for tests that must know
    /// a slot is free before they connect again.
    package var authenticatedCount: Int {
        loop.authenticatedMarks.load(ordering: .relaxed)
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
