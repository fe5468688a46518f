#if canImport(Glibc)
import Glibc
#endif

/// How a ``WebSocketServer`` listens and what it accepts.
public struct WebSocketServerConfiguration: Sendable {
    /// An IP literal (IPv4 or IPv6) to listen on, or "0.0.0.0" / "::" for all addresses
    /// ("::" also accepts IPv4 where the system allows dual-stack sockets).
    public var host: String = "127.0.0.1"
    /// The TCP port; 0 picks an ephemeral port (read it back from ``WebSocketServer/port``).
    public var port: Int = 0
    /// The WebSocket subprotocol a client must offer (Sec-WebSocket-Protocol).
    public var subprotocol: String = "speakbridge.v1"
    /// Further subprotocols accepted besides `subprotocol` (the server echoes the first offered one it knows).
    public var extraSubprotocols: [String] = []
    /// A second, TLS listener (HTTPS static files and WSS) on its own port; nil for none.
    public var secure: SecureListenerConfiguration?
    /// Request paths accepted at the HTTP upgrade; any other path is refused.
    public var allowedPaths: Set<String> = ["/speakbridge.v1/pair", "/speakbridge.v1/session"]
    /// Largest accepted message in bytes. A frame whose header announces more (together with
    /// what the message already holds) is closed with 1009 at the first receive callback for it,
    /// before more of its payload is buffered (see ``MessageReassembler``).
    public var maxMessageSize: Int = 65535
    /// Seconds from TCP accept until ``WebSocketServer/markAuthenticated(_:)`` must have been
    /// called; then an upgraded connection is closed with 1008 and one still in the HTTP upgrade
    /// is dropped.
    public var handshakeTimeout: Int = 5
    /// Most unauthenticated connections (TCP accepted, upgraded or not, and not yet marked
    /// authenticated) held at once. When full, a new connection evicts the oldest unauthenticated
    /// connection of the address holding the most, so a new address always gets in.
    public var maxUnauthenticated: Int = 64
    /// Most unauthenticated connections one address (an IPv4 address or an IPv6 /64) may hold;
    /// a further connection from it is refused at TCP accept. At most `maxUnauthenticated`.
    public var maxUnauthenticatedPerAddress: Int = 8
    /// Most bytes queued for one connection and not yet taken by its socket. A peer that stops
    /// reading while it keeps asking for replies reaches it: the queue is then dropped and the
    /// connection closed with 1008 ("not reading"), so it cannot make the server buffer more.
    /// The default leaves room for the largest burst the daemon sends at once (a config batch: 64 parts of up to
    /// 64 KiB) several times over.
    public var maxQueuedBytes: Int = 16 << 20
    /// Most bytes queued across the connections of one group (``WebSocketServer/markAuthenticated(_:group:)``: the
    /// daemon makes each device's connections a group). A send that would take the group over it closes the
    /// connection it was for, as `maxQueuedBytes` does ("not reading"), so a peer with several connections that
    /// reads none cannot make the server buffer `maxQueuedBytes` once per connection.
    public var maxQueuedBytesPerGroup: Int = 16 << 20
    /// Seconds without a sign of life from the peer before lws sends a PING.
    public var pingInterval: Int = 20
    /// Seconds without a sign of life (PONG or the handshake) before the connection is
    /// dropped; must be greater than `pingInterval`.
    public var hangupAfter: Int = 30

    public init() {}

    func validate() throws(WebSocketError) {
        guard IPLiteral(host) != nil else {
            throw .invalidConfiguration("host \"\(host)\" is not an IP literal")
        }
        guard (0...65535).contains(port) else {
            throw .invalidConfiguration("port \(port) is outside 0...65535")
        }
        guard isToken(subprotocol) else {
            throw .invalidConfiguration("subprotocol \"\(subprotocol)\" must be a non-empty ASCII token")
        }
        guard extraSubprotocols.allSatisfy(isToken), !extraSubprotocols.contains(subprotocol),
              Set(extraSubprotocols).count == extraSubprotocols.count else {
            throw .invalidConfiguration("extraSubprotocols must be distinct tokens other than subprotocol")
        }
        try secure?.validate()
        guard !allowedPaths.isEmpty, allowedPaths.allSatisfy({ $0.hasPrefix("/") }) else {
            throw .invalidConfiguration("allowedPaths must be non-empty paths starting with \"/\"")
        }
        guard maxMessageSize >= 1 else {
            throw .invalidConfiguration("maxMessageSize must be at least 1")
        }
        guard (1...3600).contains(handshakeTimeout) else {
            throw .invalidConfiguration("handshakeTimeout must be 1...3600 seconds")
        }
        guard maxUnauthenticated >= 1 else {
            throw .invalidConfiguration("maxUnauthenticated must be at least 1")
        }
        guard (1...maxUnauthenticated).contains(maxUnauthenticatedPerAddress) else {
            throw .invalidConfiguration("maxUnauthenticatedPerAddress must be 1...maxUnauthenticated")
        }
        guard maxQueuedBytes >= maxMessageSize else {
            throw .invalidConfiguration("maxQueuedBytes must be at least maxMessageSize")
        }
        guard maxQueuedBytesPerGroup >= maxMessageSize else {
            throw .invalidConfiguration("maxQueuedBytesPerGroup must be at least maxMessageSize")
        }
        try validateLiveness(pingInterval: pingInterval, hangupAfter: hangupAfter)
    }
}

/// How a ``WebSocketClient`` treats its connections.
public struct WebSocketClientConfiguration: Sendable {
    /// Largest accepted message in bytes; a larger one closes the connection with 1009.
    public var maxMessageSize: Int = 65535
    /// Seconds without a sign of life from the server before lws sends a PING.
    public var pingInterval: Int = 20
    /// Seconds without a sign of life before the connection is dropped; must be greater
    /// than `pingInterval`.
    public var hangupAfter: Int = 30
    /// Most bytes of messages queued for one connection and not yet written; past it the connection is closed
    /// (1008 "not reading"), as the server does. 64 MiB: above what `send`'s window may have in flight (8 MiB of
    /// text, each byte escaped to at most six in JSON) and config replies, so only a server that stopped reading
    /// while asking for more — a compromised desktop repeating `config-pull` — reaches it.
    public var maxQueuedBytes: Int = 64 << 20

    public init() {}

    func validate() throws(WebSocketError) {
        guard maxMessageSize >= 1 else {
            throw .invalidConfiguration("maxMessageSize must be at least 1")
        }
        guard maxQueuedBytes >= maxMessageSize else {
            throw .invalidConfiguration("maxQueuedBytes must be at least maxMessageSize")
        }
        try validateLiveness(pingInterval: pingInterval, hangupAfter: hangupAfter)
    }
}

private func validateLiveness(pingInterval: Int, hangupAfter: Int) throws(WebSocketError) {
    // lws_retry_bo_t stores both as uint16_t.
    guard (1...65535).contains(pingInterval), (1...65535).contains(hangupAfter) else {
        throw .invalidConfiguration("pingInterval and hangupAfter must be 1...65535 seconds")
    }
    guard hangupAfter > pingInterval else {
        throw .invalidConfiguration(
            "hangupAfter (\(hangupAfter)) must be greater than pingInterval (\(pingInterval))")
    }
}

/// A subprotocol name: non-empty printable ASCII without separators.
func isToken(_ text: String) -> Bool {
    !text.isEmpty && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ",") }
}

/// The address family of an IP literal, or nil when the text is not one.
enum IPLiteral {
    case v4, v6

    init?(_ text: String) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self = .v4
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            self = .v6
        } else {
            return nil
        }
    }
}
