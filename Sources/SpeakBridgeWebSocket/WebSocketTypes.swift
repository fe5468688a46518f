/// Identifies one WebSocket connection of a ``WebSocketServer`` or ``WebSocketClient``.
///
/// IDs come from one process-wide counter, so they are unique across all servers and
/// clients in the process and are never reused.
public struct WebSocketConnectionID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public var description: String { "ws#\(rawValue)" }
}

/// What a server or client reports through its `onEvent` handler.
///
/// For every ID the sequence is: at most one `.opened`, then any number of `.message`,
/// then exactly one `.closed`. `.closed` is always the last event for an ID.
public enum WebSocketEvent: Sendable {
    /// Server: the WebSocket upgrade was accepted; `path` is the request path
    /// (e.g. "/speakbridge.v1/session") and `remoteAddress` the peer's IP address.
    /// Client: the connection is established; `path` is the requested path and
    /// `remoteAddress` the server's IP address.
    case opened(WebSocketConnectionID, path: String, remoteAddress: String)
    /// One complete binary message, reassembled from however many frames it arrived in.
    case message(WebSocketConnectionID, [UInt8])
    /// The connection is gone. For clients this is also how a failed, refused or timed-out
    /// connection attempt is reported (then without a preceding `.opened`).
    ///
    /// `reason` is for logs and people, not for parsing. Its shapes are
    /// "local close CODE[: TEXT]", "peer close CODE[: TEXT]", "connect failed: …",
    /// "connect timeout", "connection lost", "shutdown" and (server, unauthenticated only)
    /// "evicted: too many unauthenticated connections".
    case closed(WebSocketConnectionID, reason: String)
}

/// Errors thrown while creating a ``WebSocketServer`` or ``WebSocketClient``, or its TLS listener
/// (``WebSocketServer/startSecureListener(_:timeout:)``). Connection problems arrive as
/// ``WebSocketEvent/closed(_:reason:)``.
public enum WebSocketError: Error, CustomStringConvertible, Sendable {
    /// The listening socket could not be bound (address in use, address not on this host, …).
    /// `reason` carries libwebsockets' own error lines when it gave any.
    case bindFailed(host: String, port: Int, reason: String)
    /// libwebsockets could not create its context for a reason other than binding.
    case contextCreationFailed(String)
    /// A configuration value is out of range; the text names the field and the rule.
    case invalidConfiguration(String)
    /// The service thread could not be started; the value is pthread_create's error number.
    case threadCreationFailed(Int32)
    /// The server has stopped (or is stopping): it starts nothing more.
    case stopped
    /// The service thread did not answer within the given time.
    case timedOut(seconds: Double)

    public var description: String {
        switch self {
        case let .bindFailed(host, port, reason):
            "cannot listen on \(WebSocketError.hostPort(host, port)): \(reason)"
        case let .contextCreationFailed(reason):
            "cannot start libwebsockets: \(reason)"
        case let .invalidConfiguration(reason):
            "invalid websocket configuration: \(reason)"
        case let .threadCreationFailed(code):
            "cannot start the websocket service thread (pthread_create error \(code))"
        case .stopped:
            "the websocket server has stopped"
        case let .timedOut(seconds):
            "the websocket service thread did not answer within \(seconds) s"
        }
    }

    static func hostPort(_ host: String, _ port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
