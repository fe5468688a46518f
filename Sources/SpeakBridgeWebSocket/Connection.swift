import DequeModule

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
    /// Client: the subprotocol the server's `101` named, read before lws lets go of the response headers.
    var chosenSubprotocol = ""
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
    /// Server: the close frame is sent and the connection lingers, reading and dropping what the peer still sends
    /// until its own close frame comes (`ServiceLoop.closeAndLinger`).
    var closeFrameSent = false
    /// Server, authenticated: `pendingClose` was asked for by the application (`WebSocketServer.close`), so it
    /// lingers after its close frame; the loop's own closes (shutdown, not reading, handshake timeout) and those of
    /// connections not authenticated close at once.
    var lingersOnClose = false
    /// What `.closed` will report, once known.
    var closeReason: String?

    /// Outgoing messages, oldest first.
    private var outgoing = Deque<[UInt8]>()
    /// Bytes in `outgoing`.
    private(set) var outgoingBytes = 0
    /// Most bytes `outgoing` may hold (see `WebSocketServerConfiguration.maxQueuedBytes`).
    let maxQueuedBytes: Int
    /// Server only: the peer's connections whose queues share one bound (`WebSocketServer.markAuthenticated(_:group:)`).
    private(set) var group: OutgoingGroup?
    /// The message being reassembled from frames.
    var incoming: MessageReassembler
    /// Server only: the application paused reading (`WebSocketServer.pauseReceiving`). While paused the peer's
    /// PONGs stay unread in the kernel too, so the loop itself confirms the connection's validity to lws
    /// (`ServiceLoop.confirmPausedValidity`) instead of letting the hang-up timer drop a peer it stopped reading.
    var receivePaused = false
    /// Server, paused: when the loop next confirms validity for it (nanoseconds on the monotonic clock).
    var validityRefresh: UInt64?
    /// Client only: its socket is read only when asked (`ServiceLoop+LazyReceive.swift`).
    var lazyReceive = false
    /// Lazy, and reading until the socket holds nothing more (in `ServiceLoop.peeking`).
    var peeking = false
    /// Joined `ServiceLoop.peeking` during the current `lws_service` call (it reads in the next one).
    var peekFresh = false
    /// Client only: the keys its data frames are masked with (`ClientFrame`); made at the first frame.
    lazy var maskingKeys = MaskingKeys()

    init(id: WebSocketConnectionID, isClient: Bool, path: String, maxMessageSize: Int, maxQueuedBytes: Int = .max) {
        self.id = id
        self.maxQueuedBytes = maxQueuedBytes
        self.isClient = isClient
        self.isAnnounced = isClient
        self.path = path
        self.incoming = MessageReassembler(maxMessageSize: maxMessageSize)
    }

    var hasOutgoing: Bool { !outgoing.isEmpty }

    var nextOutgoing: [UInt8]? { outgoing.first }

    /// Queues a message; false (and nothing queued) when it would take the queue, or its group's, over its bound.
    func enqueue(_ message: [UInt8]) -> Bool {
        // All are sizes of arrays held in memory, so their sums cannot overflow.
        guard outgoingBytes + message.count <= maxQueuedBytes else { return false }
        if let group {
            guard group.bytes + message.count <= group.limit else { return false }
            group.bytes += message.count
        }
        outgoing.append(message)
        outgoingBytes += message.count
        return true
    }

    /// Forgets everything queued (the connection is being closed because its peer does not read, or is gone).
    func dropAllOutgoing() {
        group?.bytes -= outgoingBytes
        outgoing = []
        outgoingBytes = 0
    }

    func dropFirstOutgoing() {
        guard let sent = outgoing.popFirst() else { return }
        outgoingBytes -= sent.count
        group?.bytes -= sent.count
    }

    /// Counts this connection's queue in `group` from now on (what it holds already included).
    func join(_ group: OutgoingGroup) {
        guard self.group !== group else { return }
        leaveGroup()
        self.group = group
        group.members += 1
        group.bytes += outgoingBytes
    }

    /// Takes this connection's queue out of its group (the connection is forgotten, or joins another).
    func leaveGroup() {
        guard let group else { return }
        group.bytes -= outgoingBytes
        group.members -= 1
        self.group = nil
    }
}

/// The connections of one peer (the daemon: one device's), whose outgoing queues together may hold at most
/// `limit` bytes (`WebSocketServerConfiguration.maxQueuedBytesPerGroup`): a peer that opens several connections and
/// reads none cannot make the server buffer the per-connection bound once per connection. Touched only on the
/// service thread, like `Connection`.
final class OutgoingGroup {
    let name: String
    let limit: Int
    /// Bytes queued in its members' `outgoing`.
    var bytes = 0
    /// Connections counted in it.
    var members = 0

    init(name: String, limit: Int) {
        self.name = name
        self.limit = limit
    }
}
