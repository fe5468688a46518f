import SpeakBridgeSupport

/// Subprotocol, listener and user agent of each announced server connection, for other threads to read (written on
/// the service thread before `.opened`, removed when the connection is forgotten).
///
/// A non-generic class rather than a `Locked<[WebSocketConnectionID: WebSocketConnectionInfo]>`: that generic
/// class's metadata, made when a `ServiceLoop` is created, needs the dictionary's, whose first use in a process looks
/// up `WebSocketConnectionID: Hashable` among every conformance record of the binary (about 0.15 M instructions) —
/// on the caller's thread as `send` starts, for a table only a server fills. Here the dictionary's metadata is made
/// at its first insert.
///
/// `@unchecked Sendable`: `table` is only touched inside `withLock`, under `lock`.
final class ConnectionInfoTable: @unchecked Sendable {
    private let lock = ThreadLock()
    private var table: [WebSocketConnectionID: WebSocketConnectionInfo] = [:]

    func withLock<R>(_ body: (inout [WebSocketConnectionID: WebSocketConnectionInfo]) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&table)
    }
}
