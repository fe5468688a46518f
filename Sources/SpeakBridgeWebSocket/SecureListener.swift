// The optional second listener of a server: TLS (HTTPS and WSS) on its own port, for browsers. It shares the
// context, the protocol callback, the admission limits and the connection IDs of the plain listener, so the
// application handles its WebSocket connections exactly like the others; in addition, plain HTTPS GETs are
// answered from a read-only directory of static files (an lws file mount). Native clients keep the plain port.
// It starts with the server (``WebSocketServerConfiguration/secure``) or later, on demand
// (``WebSocketServer/startSecureListener(_:timeout:)``); OpenSSL is not touched before it starts.

/// TLS listener settings (see ``WebSocketServerConfiguration/secure``).
public struct SecureListenerConfiguration: Sendable {
    /// The TCP port; 0 picks an ephemeral port (read it back from ``WebSocketServer/securePort``).
    public var port: Int
    /// PEM certificate chain and PEM private key, read by OpenSSL when the listener starts.
    public var certificatePath: String
    public var privateKeyPath: String
    /// Directory served read-only at "/" (index.html for "/"); nil serves no files.
    public var documentRoot: String?
    /// Headers added to every HTTP response of this listener (e.g. Content-Security-Policy). Names end in ":".
    public var headers: [(name: String, value: String)]

    public init(port: Int, certificatePath: String, privateKeyPath: String, documentRoot: String?,
                headers: [(name: String, value: String)] = []) {
        self.port = port
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
        self.documentRoot = documentRoot
        self.headers = headers
    }

    func validate() throws(WebSocketError) {
        guard (0...65535).contains(port) else {
            throw .invalidConfiguration("secure port \(port) is outside 0...65535")
        }
        guard !certificatePath.isEmpty, !privateKeyPath.isEmpty else {
            throw .invalidConfiguration("the secure listener needs a certificate and a private key")
        }
        for header in headers where !header.name.hasSuffix(":") || header.name.utf8.contains(where: { $0 < 0x21 || $0 > 0x7E })
            || header.value.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            throw .invalidConfiguration("header \"\(header.name)\" is not a valid HTTP header")
        }
    }
}

/// What the server knows about an accepted WebSocket connection, beyond its path and address.
public struct WebSocketConnectionInfo: Sendable {
    /// The subprotocol the server chose (and echoed) among those the client offered.
    public var subprotocol: String
    /// The connection came in through the TLS listener.
    public var isSecure: Bool
    /// The client's User-Agent header, cut to 256 bytes ("" when absent). Peer text: sanitize before showing.
    public var userAgent: String
}

extension WebSocketServer {
    /// Starts the TLS listener now and returns its port (the ephemeral one if `secure.port` is 0); when it is already
    /// listening, returns its port and ignores `secure`. The subprotocols it accepts are the server's (set
    /// `extraSubprotocols` when creating the server). Waits at most `timeout` seconds for the service thread.
    ///
    /// Throws ``WebSocketError/bindFailed(host:port:reason:)`` when the port cannot be bound or OpenSSL refuses the
    /// certificate or key (the reason carries lws's lines), ``WebSocketError/stopped`` after ``shutdown()``,
    /// ``WebSocketError/timedOut(seconds:)``, and ``WebSocketError/invalidConfiguration(_:)`` for a bad `secure` or
    /// when called from inside `onEvent` (it cannot wait on its own thread). A failed start leaves the server as it
    /// was: it may be called again.
    public func startSecureListener(_ secure: SecureListenerConfiguration, timeout: Double = 10) throws(WebSocketError) -> Int {
        try secure.validate()
        return try loop.startSecure(secure, timeout: timeout)
    }
}
