/// One WebSocket connection as the service thread sees it.
///
/// Touched only on the service thread (see ``ServiceLoop``), so it needs no lock.
final class Connection {
    let id: WebSocketConnectionID
    let isClient: Bool
    /// The lws connection. Nil only for a client whose `lws_client_connect_via_info` call has
    /// not returned yet. Valid until lws reports the connection closed, at which point the
    /// loop forgets this object.
    var wsi: OpaquePointer?
    /// Server: the upgrade was accepted. Client: the connection is established.
    var isEstablished = false
    /// The application knows this ID, so `.closed` must be reported for it: always for a client
    /// (the ID came from `connect`), for a server connection once `.opened` went out. A server
    /// connection still in its HTTP upgrade is tracked (for the unauthenticated limits) but never
    /// reported.
    var isAnnounced: Bool
    /// Server only: ``WebSocketServer/markAuthenticated(_:)`` was called.
    var isAuthenticated = false
    /// Server: end of the allowed unauthenticated time. Client: end of the connect timeout.
    /// Nanoseconds on the monotonic clock.
    var deadline: UInt64?
    /// The path requested (client) or received (server), reported in `.opened`.
    var path: String
    /// A close asked for by the application; sent once the outgoing queue is empty.
    var pendingClose: (code: UInt16, reason: String)?
    /// What `.closed` will report, once known.
    var closeReason: String?

    /// Outgoing messages, oldest first, from `outgoingHead` on.
    private var outgoing: [[UInt8]] = []
    private var outgoingHead = 0
    /// The message being reassembled from frames.
    var incoming: MessageReassembler

    init(id: WebSocketConnectionID, isClient: Bool, path: String, maxMessageSize: Int) {
        self.id = id
        self.isClient = isClient
        self.isAnnounced = isClient
        self.path = path
        self.incoming = MessageReassembler(maxMessageSize: maxMessageSize)
    }

    var hasOutgoing: Bool { outgoingHead < outgoing.count }

    var nextOutgoing: [UInt8]? { hasOutgoing ? outgoing[outgoingHead] : nil }

    func enqueue(_ message: [UInt8]) {
        outgoing.append(message)
    }

    func dropFirstOutgoing() {
        outgoing[outgoingHead] = []
        outgoingHead += 1
        if outgoingHead == outgoing.count {
            outgoing.removeAll(keepingCapacity: outgoing.capacity <= 1024)
            outgoingHead = 0
        } else if outgoingHead >= 256, outgoingHead * 2 >= outgoing.count {
            outgoing.removeFirst(outgoingHead)
            outgoingHead = 0
        }
    }
}
