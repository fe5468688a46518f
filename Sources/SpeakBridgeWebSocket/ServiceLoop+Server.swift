// The server side of the service loop: who gets in. Runs on the service thread only.
//
// Flow of one incoming connection:
// 1. FILTER_NETWORK_CONNECTION (right after accept(), before lws allocates anything): refused
//    (TCP closed) when stopping or when its address already holds `maxUnauthenticatedPerAddress`
//    unauthenticated connections.
// 2. SERVER_NEW_CLIENT_INSTANTIATED: the connection is admitted (AdmissionControl) and counts as
//    unauthenticated from here on, before it has sent a byte; if `maxUnauthenticated` are held,
//    the oldest of the address holding the most is evicted (dropped) first. Its handshake deadline
//    starts now. It is tracked as a Connection but not announced to the application.
// 3. HTTP_CONFIRM_UPGRADE: an upgrade from a web page of another origin (or of a rebindable name: UpgradeOrigin),
//    to a path we do not serve, without our subprotocol, or while stopping is answered with an HTTP error status,
//    then the connection is closed.
// 4. FILTER_PROTOCOL_CONNECTION repeats the checks (lws has chosen the protocol by then).
// 5. ESTABLISHED: `.opened` goes to the application, which calls markAuthenticated once its own
//    handshake succeeded; that lifts the deadline and frees the unauthenticated slot.
// Plain HTTP requests (no upgrade) are not served: LWS_CALLBACK_HTTP hangs up.
internal import CLibWebSockets
#if canImport(Glibc)
import Glibc
#endif

extension ServiceLoop {
    var serverConfiguration: WebSocketServerConfiguration? {
        if case let .server(configuration) = role { configuration } else { nil }
    }

    /// Step 1: refuse cheaply, before lws allocates a wsi for the socket.
    func acceptsNetworkConnection(_ fd: Int32) -> Bool {
        guard serverConfiguration != nil, !stopRequested, let address = AddressKey(peerOf: fd) else { return false }
        return !admission.refuses(address)
    }

    /// Step 2: admit (maybe evicting someone) and start the handshake deadline.
    func serverAccepted(_ wsi: OpaquePointer) -> Bool {
        guard let configuration = serverConfiguration, !stopRequested,
              let address = AddressKey(peerOf: lws_get_socket_fd(wsi)) else { return false }
        let id = makeConnectionID()
        switch admission.admit(id, from: address) {
        case .refuse:
            return false
        case let .admit(evicting: victim):
            if let victim, let connection = connections[victim] {
                abandon(connection, reason: "evicted: too many unauthenticated connections")
            }
        }
        let connection = Connection(id: id, isClient: false, path: "", maxMessageSize: configuration.maxMessageSize,
                                    maxQueuedBytes: configuration.maxQueuedBytes)
        connection.wsi = wsi
        connection.deadline = monotonicNanoseconds() + UInt64(configuration.handshakeTimeout) * 1_000_000_000
        connections[id] = connection
        lws_set_opaque_user_data(wsi, UnsafeMutableRawPointer(bitPattern: UInt(id.rawValue)))
        rescheduleDeadlineTimer()
        return true
    }

    /// Step 3: returns 0 to let lws go on with the upgrade, or writes an HTTP error status and
    /// returns -1 (lws then closes the connection).
    func confirmUpgrade(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?) -> Int32 {
        let upgrade = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? ""
        let status: Int32
        if upgrade.lowercased() != "websocket" {
            status = 400
        } else if let refusal = upgradeRefusal(wsi) {
            status = refusal
        } else {
            return 0
        }
        _ = lws_return_http_status(wsi, UInt32(status), nil)
        return -1
    }

    /// Step 4: lws has bound the protocol; the same rules once more.
    func acceptsUpgrade(_ wsi: OpaquePointer) -> Bool {
        upgradeRefusal(wsi) == nil
    }

    /// The HTTP status an upgrade request gets refused with, or nil to accept it:
    /// 503 while stopping or for a connection no longer admitted (evicted), 403 for an `Origin` that is not the
    /// request's own (or a Host an attacker could rebind: UpgradeOrigin), 404 for a path we do not serve, 400 when
    /// our subprotocol is not offered.
    private func upgradeRefusal(_ wsi: OpaquePointer) -> Int32? {
        guard let configuration = serverConfiguration, !stopRequested, connection(for: wsi) != nil else {
            return 503
        }
        // An Origin too long to copy is still an Origin: "" then, which matches nothing.
        let origin = header(wsi, WSI_TOKEN_ORIGIN) ?? (lws_hdr_total_length(wsi, WSI_TOKEN_ORIGIN) > 0 ? "" : nil)
        guard UpgradeOrigin.allows(origin: origin, host: header(wsi, WSI_TOKEN_HOST), secure: lws_is_ssl(wsi) != 0) else {
            return 403
        }
        guard let path = header(wsi, WSI_TOKEN_GET_URI), configuration.allowedPaths.contains(path) else {
            return 404
        }
        guard let offered = header(wsi, WSI_TOKEN_PROTOCOL) else { return 400 }
        let names = offered.split(separator: ",").map { $0.trimmingCharacters(in: " \t") }
        let accepted = [configuration.subprotocol] + configuration.extraSubprotocols
        return names.contains(where: accepted.contains) ? nil : 400
    }

    /// Step 5: the WebSocket is up; tell the application.
    func serverEstablished(_ wsi: OpaquePointer) -> Bool {
        guard let connection = connection(for: wsi), !connection.isClient else { return false }
        connection.isEstablished = true
        connection.isAnnounced = true
        connection.path = header(wsi, WSI_TOKEN_GET_URI) ?? ""
        recordInfo(connection.id, wsi)
        emit(.opened(connection.id, path: connection.path, remoteAddress: peerAddress(wsi)))
        return true
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
