// What the service loop does inside lws callbacks. Everything here runs on the service
// thread.
//
// Connection lifecycle as lws reports it:
//   server: FILTER_PROTOCOL_CONNECTION (path, subprotocol, cap) → ESTABLISHED → RECEIVE* /
//           SERVER_WRITEABLE* → [WS_PEER_INITIATED_CLOSE] → CLOSED → WSI_DESTROY
//   client: (connect command) → CLIENT_ESTABLISHED → CLIENT_RECEIVE* / CLIENT_WRITEABLE* →
//           [WS_PEER_INITIATED_CLOSE] → CLIENT_CLOSED → WSI_DESTROY,
//           or CLIENT_CONNECTION_ERROR → WSI_DESTROY
// A wsi is tied to its Connection through lws's opaque user data, which holds the
// connection ID (never a Swift reference).
internal import CLibWebSockets
#if canImport(Glibc)
import Glibc
#endif

/// The protocol callback lws calls for every event. File-level so it captures nothing and
/// is nonisolated (C-LIBRARY-NOTES §1 pitfalls 9 and 10).
func lwsProtocolCallback(
    _ wsi: OpaquePointer?, _ reason: lws_callback_reasons,
    _ user: UnsafeMutableRawPointer?, _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
    guard let wsi, let context = lws_get_context(wsi), let owner = lws_context_user(context) else {
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
    // `info.user` is the loop, which the service thread keeps alive while the context exists.
    let loop = Unmanaged<ServiceLoop>.fromOpaque(owner).takeUnretainedValue()
    return loop.withCallbackScope {
        loop.handle(wsi, reason, user, input, length)
    }
}

extension ServiceLoop {
    /// Runs one entry from lws; when the outermost one ends, runs the commands that event
    /// handlers issued on this thread meanwhile.
    func withCallbackScope<R>(_ body: () -> R) -> R {
        callbackDepth += 1
        let result = body()
        if callbackDepth == 1 {
            while !localCommands.isEmpty {
                let commands = localCommands
                localCommands = []
                for command in commands {
                    apply(command)
                }
            }
        }
        callbackDepth -= 1
        return result
    }

    func handle(
        _ wsi: OpaquePointer, _ reason: lws_callback_reasons,
        _ user: UnsafeMutableRawPointer?, _ input: UnsafeMutableRawPointer?, _ length: Int
    ) -> Int32 {
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            drainInbox()
            return 0
        case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
            return acceptsUpgrade(wsi) ? 0 : 1
        case LWS_CALLBACK_ESTABLISHED:
            serverEstablished(wsi)
            return 0
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            clientEstablished(wsi)
            return 0
        case LWS_CALLBACK_RECEIVE, LWS_CALLBACK_CLIENT_RECEIVE:
            return receive(wsi, input, length)
        case LWS_CALLBACK_SERVER_WRITEABLE, LWS_CALLBACK_CLIENT_WRITEABLE:
            return writeable(wsi)
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            peerStartedClose(wsi, input, length)
            return 0
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            let detail = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "unknown error"
            finish(wsi, reason: "connect failed: \(detail)")
            return 0
        case LWS_CALLBACK_CLOSED, LWS_CALLBACK_CLIENT_CLOSED:
            finish(wsi, reason: "connection lost")
            return 0
        case LWS_CALLBACK_WSI_DESTROY:
            // Safety net: every wsi ends here, whatever happened before.
            finish(wsi, reason: "connection lost")
            return 0
        case LWS_CALLBACK_HTTP:
            // Plain HTTP is not served: only WebSocket upgrades.
            return -1
        default:
            return lws_callback_http_dummy(wsi, reason, user, input, length)
        }
    }

    // MARK: commands

    func drainInbox() {
        var commands: [Command] = []
        inbox.withLock { swap(&commands, &$0.commands) }
        for command in commands {
            apply(command)
        }
    }

    func apply(_ command: Command) {
        switch command {
        case let .send(id, message):
            guard let connection = connections[id], connection.pendingClose == nil else { return }
            connection.enqueue(message)
            requestWriteable(connection)
        case let .close(id, code, reason):
            guard let connection = connections[id] else { return }
            close(connection, code: code, reason: reason)
        case let .markAuthenticated(id):
            guard let connection = connections[id], !connection.isClient else { return }
            connection.isAuthenticated = true
            if connection.deadline != nil {
                connection.deadline = nil
                rescheduleDeadlineTimer()
            }
        case let .setReceiving(id, enabled):
            guard let connection = connections[id], connection.isEstablished, let wsi = connection.wsi else { return }
            // Frames lws already read stay buffered and are delivered after a resume; no new bytes are read
            // from the socket meanwhile, so the peer's TCP window fills and it is held back by the kernel.
            lws_rx_flow_control(wsi, enabled ? 1 : 0)
        case let .connect(id, request):
            connect(id, request)
        case .stop:
            beginStop()
        }
    }

    private func requestWriteable(_ connection: Connection) {
        if connection.isEstablished, let wsi = connection.wsi {
            lws_callback_on_writable(wsi)
        }
    }

    /// Closes with a status code once queued messages are out; a client that is still
    /// connecting is dropped at once.
    func close(_ connection: Connection, code: UInt16, reason: String) {
        guard connection.pendingClose == nil else { return }
        guard connection.isEstablished else {
            abandon(connection, reason: "local close \(code) before the connection was established")
            return
        }
        let code = (1000...4999).contains(code) ? code : 1000
        connection.pendingClose = (code, reason)
        connection.closeReason = reason.isEmpty ? "local close \(code)" : "local close \(code): \(reason)"
        requestWriteable(connection)
        // If the peer stops reading, WRITEABLE may never come: give up after a while.
        if let wsi = connection.wsi {
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, 5)
        }
    }

    /// Forgets a connection that is not established yet, reports it closed and lets lws
    /// drop the socket at its next timeout check.
    private func abandon(_ connection: Connection, reason: String) {
        connections[connection.id] = nil
        if let wsi = connection.wsi {
            lws_set_opaque_user_data(wsi, nil)
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
        }
        if connection.deadline != nil {
            rescheduleDeadlineTimer()
        }
        emit(.closed(connection.id, reason: reason))
    }

    private func beginStop() {
        guard !stopRequested else { return }
        stopRequested = true
        stopDeadline = monotonicNanoseconds() + ServiceLoop.shutdownGraceNanoseconds
        for connection in connections.values.sorted(by: { $0.id.rawValue < $1.id.rawValue }) {
            if connection.isEstablished {
                close(connection, code: 1001, reason: "shutdown")
            } else {
                abandon(connection, reason: "shutdown")
            }
        }
        rescheduleDeadlineTimer()
    }

    // MARK: deadlines

    func deadlinesPassed() {
        let now = monotonicNanoseconds()
        let due = connections.values
            .filter { ($0.deadline ?? .max) <= now }
            .sorted { $0.id.rawValue < $1.id.rawValue }
        for connection in due {
            connection.deadline = nil
            if connection.isClient {
                abandon(connection, reason: "connect timeout")
            } else if !connection.isAuthenticated {
                close(connection, code: 1008, reason: "handshake timeout")
            }
        }
        rescheduleDeadlineTimer()
    }

    // MARK: server side

    private var serverConfiguration: WebSocketServerConfiguration? {
        if case let .server(configuration) = role { configuration } else { nil }
    }

    private var maxMessageSize: Int {
        switch role {
        case let .server(configuration): configuration.maxMessageSize
        case let .client(configuration): configuration.maxMessageSize
        }
    }

    /// Decides at the HTTP upgrade: allowed path, our subprotocol offered, room for one more
    /// unauthenticated connection, not shutting down.
    private func acceptsUpgrade(_ wsi: OpaquePointer) -> Bool {
        guard let configuration = serverConfiguration, !stopRequested else { return false }
        guard let path = header(wsi, WSI_TOKEN_GET_URI), configuration.allowedPaths.contains(path) else {
            return false
        }
        guard let offered = header(wsi, WSI_TOKEN_PROTOCOL) else { return false }
        let names = offered.split(separator: ",").map { $0.trimmingCharacters(in: " \t") }
        guard names.contains(configuration.subprotocol) else { return false }
        let unauthenticated = connections.values.count { !$0.isClient && !$0.isAuthenticated }
        return unauthenticated < configuration.maxUnauthenticated
    }

    private func serverEstablished(_ wsi: OpaquePointer) {
        guard let configuration = serverConfiguration else { return }
        let id = makeConnectionID()
        let connection = Connection(id: id, isClient: false, path: header(wsi, WSI_TOKEN_GET_URI) ?? "")
        connection.wsi = wsi
        connection.isEstablished = true
        connection.deadline = monotonicNanoseconds() + UInt64(configuration.handshakeTimeout) * 1_000_000_000
        connections[id] = connection
        lws_set_opaque_user_data(wsi, UnsafeMutableRawPointer(bitPattern: UInt(id.rawValue)))
        rescheduleDeadlineTimer()
        emit(.opened(id, path: connection.path, remoteAddress: peerAddress(wsi)))
    }

    // MARK: client side

    private func connect(_ id: WebSocketConnectionID, _ request: ConnectRequest) {
        guard let context, !stopRequested else {
            emit(.closed(id, reason: "shutdown"))
            return
        }
        guard (1...65535).contains(request.port) else {
            emit(.closed(id, reason: "connect failed: port \(request.port) is outside 1...65535"))
            return
        }
        let connection = Connection(id: id, isClient: true, path: request.path)
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
            connections[id] = nil
            rescheduleDeadlineTimer()
            emit(.closed(id, reason: "connect failed: \(request.host) port \(request.port)"))
            return
        }
        connection.wsi = wsi
        rescheduleDeadlineTimer()
    }

    private func clientEstablished(_ wsi: OpaquePointer) {
        guard let connection = connection(for: wsi) else { return }
        connection.wsi = wsi
        connection.isEstablished = true
        connection.deadline = nil
        rescheduleDeadlineTimer()
        emit(.opened(connection.id, path: connection.path, remoteAddress: peerAddress(wsi)))
        if connection.hasOutgoing {
            lws_callback_on_writable(wsi)
        }
    }

    // MARK: both sides

    func connection(for wsi: OpaquePointer) -> Connection? {
        guard let raw = lws_get_opaque_user_data(wsi) else { return nil }
        return connections[WebSocketConnectionID(rawValue: UInt64(UInt(bitPattern: raw)))]
    }

    private func receive(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        guard let connection = connection(for: wsi) else { return -1 }
        if lws_frame_is_binary(wsi) == 0 {
            return fail(connection, wsi, code: 1003, reason: "binary frames only")
        }
        // lws_remaining_packet_payload is what the frame header announced and has not yet
        // arrived, so an oversize message is refused before its payload is buffered.
        let announced = connection.incoming.count + length + Int(lws_remaining_packet_payload(wsi))
        if announced > maxMessageSize {
            return fail(connection, wsi, code: 1009, reason: "message too big")
        }
        if let input, length > 0 {
            connection.incoming.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
        }
        if lws_is_final_fragment(wsi) != 0 {
            let message = connection.incoming
            connection.incoming = []
            emit(.message(connection.id, message))
        }
        return 0
    }

    /// Closes right away from inside a callback because of what the peer sent.
    private func fail(_ connection: Connection, _ wsi: OpaquePointer, code: UInt16, reason: String) -> Int32 {
        connection.closeReason = "local close \(code): \(reason)"
        sendCloseFrame(wsi, code: code, reason: reason)
        return -1
    }

    private func peerStartedClose(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ length: Int) {
        guard let connection = connection(for: wsi) else { return }
        guard let input, length >= 2 else {
            connection.closeReason = "peer close 1005"
            return
        }
        let bytes = UnsafeRawBufferPointer(start: input, count: length)
        let code = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        let text = String(decoding: bytes.dropFirst(2), as: UTF8.self)
        connection.closeReason = text.isEmpty ? "peer close \(code)" : "peer close \(code): \(text)"
    }

    /// Reports a connection gone (once) and forgets it.
    private func finish(_ wsi: OpaquePointer, reason: String) {
        guard let connection = connection(for: wsi) else { return }
        lws_set_opaque_user_data(wsi, nil)
        connections[connection.id] = nil
        if connection.deadline != nil {
            rescheduleDeadlineTimer()
        }
        emit(.closed(connection.id, reason: connection.closeReason ?? reason))
    }

    // MARK: small lws helpers

    private func header(_ wsi: OpaquePointer, _ token: lws_token_indexes) -> String? {
        let total = Int(lws_hdr_total_length(wsi, token))
        guard total > 0, total <= 8192 else { return nil }
        var buffer = [CChar](repeating: 0, count: total + 1)
        let copied = lws_hdr_copy(wsi, &buffer, Int32(buffer.count), token)
        guard copied >= 0 else { return nil }
        return String(decoding: buffer.prefix(Int(copied)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private func peerAddress(_ wsi: OpaquePointer) -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        guard lws_get_peer_simple(wsi, &buffer, buffer.count) != nil else { return "" }
        let text = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: text, as: UTF8.self)
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var slice = self[...]
        while let first = slice.first, set.contains(first) { slice = slice.dropFirst() }
        while let last = slice.last, set.contains(last) { slice = slice.dropLast() }
        return String(slice)
    }
}
