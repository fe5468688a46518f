// The client side of the service loop: outgoing connections. Runs on the service thread only.
//
// A `connect` command registers the Connection (announced: the application already holds its
// ID) with a connect deadline, then asks lws to dial. lws reports CLIENT_ESTABLISHED, or
// CLIENT_CONNECTION_ERROR / a timeout, which end it with `.closed` and no `.opened`.
internal import CLibWebSockets
import SpeakBridgeSupport

extension ServiceLoop {
    private var clientMaxMessageSize: Int {
        if case let .client(configuration) = role { configuration.maxMessageSize } else { 0 }
    }

    private var clientMaxQueuedBytes: Int {
        if case let .client(configuration) = role { configuration.maxQueuedBytes } else { 0 }
    }

    func connect(_ id: WebSocketConnectionID, _ request: ConnectRequest) {
        guard let context, !stopRequested else {
            emit(.closed(id, reason: "shutdown"))
            return
        }
        guard (1...65535).contains(request.port) else {
            emit(.closed(id, reason: "connect failed: port \(request.port) is outside 1...65535"))
            return
        }
        // Bounded like a server's: before, a client's queue had no bound at all.
        let connection = Connection(id: id, isClient: true, path: request.path, maxMessageSize: clientMaxMessageSize,
                                    maxQueuedBytes: clientMaxQueuedBytes)
        connection.deadline = monotonicNanoseconds() + UInt64(max(1, request.timeoutSeconds)) * 1_000_000_000
        connections[id] = connection

        var info = lws_client_connect_info()
        info.context = context
        info.port = Int32(request.port)
        info.opaque_user_data = UnsafeMutableRawPointer(bitPattern: UInt(id.rawValue))
        info.retry_and_idle_policy = UnsafePointer(retryPolicy)
        let hostHeader = request.host.contains(":") ? "[\(request.host)]" : request.host
        // lws copies these strings into its own storage during the call (notes §1 pitfall 12).
        let wsi = request.host.withCString { address in
            request.path.withCString { path in
                hostHeader.withCString { host in
                    request.subprotocol.withCString { subprotocol in
                        ServiceLoop.clientProtocolName.withCString { localName in
                            info.address = address
                            info.path = path
                            info.host = host
                            info.protocol = subprotocol
                            info.local_protocol_name = localName
                            return lws_client_connect_via_info(&info)
                        }
                    }
                }
            }
        }
        // lws may already have reported a failure (and we forgot the connection).
        guard connections[id] === connection else { return }
        guard let wsi else {
            removeConnection(id)
            rescheduleDeadlineTimer()
            emit(.closed(id, reason: "connect failed: \(request.host) port \(request.port)"))
            return
        }
        connection.wsi = wsi
        rescheduleDeadlineTimer()
    }

    /// The server's `101` has come and lws has checked it (its subprotocol is one of those offered); its headers
    /// are gone by CLIENT_ESTABLISHED, so the chosen subprotocol is noted here.
    func clientAnswered(_ wsi: OpaquePointer) {
        guard let connection = connection(for: wsi) else { return }
        connection.chosenSubprotocol = header(wsi, WSI_TOKEN_PROTOCOL) ?? ""
    }

    func clientEstablished(_ wsi: OpaquePointer) {
        guard let connection = connection(for: wsi) else { return }
        connection.wsi = wsi
        connection.isEstablished = true
        Trace.mark("upgraded")
        connection.deadline = nil
        rescheduleDeadlineTimer()
        let chosen = WebSocketConnectionInfo(subprotocol: connection.chosenSubprotocol, isSecure: false, userAgent: "")
        connectionInfo.withLock { $0[connection.id] = chosen }
        emit(.opened(connection.id, path: connection.path, remoteAddress: peerAddress(wsi)))
        if connection.hasOutgoing {
            lws_callback_on_writable(wsi)
        }
    }
}
