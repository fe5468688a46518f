internal import CLibWebSockets
#if canImport(Glibc)
import Glibc
#endif

/// Lazy receiving (client connections): the socket is read only when the application asks, so frames the peer
/// sends while the application is busy elsewhere — a sender's acks between two lines — wait in the kernel instead
/// of waking this thread one by one.
///
/// Flow:
/// 1. `receiveLazily(id, true)`: lws stops polling the socket for input (rx flow control). Bytes that arrive wait in
///    the kernel; the peer is not held back (a few acks are far below any socket buffer).
/// 2. `receivePending(id)` (from the service thread, typically while it handles the application's own input):
///    when the socket holds bytes (`recv` with `MSG_PEEK`), polling for input is turned on again and the
///    connection joins `peeking`; lws's next poll returns at once and reads them — no sleep, no wake-up.
/// 3. After the next `lws_service` call — the one whose poll returned at once for those bytes and read them (up to
///    lws's buffer, far more than a few acks) — `pauseAfterReadTurn` puts the connection back to lazy without
///    another look: whatever came meanwhile, or did not fit, is read with the next `receivePending`.
/// 4. `receiveLazily(id, false)`: reading as usual from now on.
/// A lazy socket is not polled for input, so a peer's close (FIN) is seen only at the next `receivePending` or
/// when lazy ends; a reset (POLLERR/POLLHUP, which poll always reports) is seen at once.
extension ServiceLoop {
    func setLazy(_ id: WebSocketConnectionID, _ lazy: Bool) {
        guard let connection = self.connection(id), connection.isClient, connection.isEstablished,
              connection.pendingClose == nil, let wsi = connection.wsi, connection.lazyReceive != lazy else { return }
        connection.lazyReceive = lazy
        if lazy {
            if !connection.peeking { lws_rx_flow_control(wsi, 0) }
        } else {
            connection.peeking = false
            lws_rx_flow_control(wsi, 1)
        }
    }

    func readPending(_ id: WebSocketConnectionID) {
        guard let connection = self.connection(id), connection.lazyReceive, !connection.peeking,
              connection.pendingClose == nil, let wsi = connection.wsi, Self.socketHasInput(wsi) else { return }
        connection.peeking = true
        connection.peekFresh = true
        peeking.append(connection)
        lws_rx_flow_control(wsi, 1)
    }

    /// Between two `lws_service` calls (outside any lws callback): connections that joined `peeking` during the
    /// last call read in the next one; the others have read, and stop reading.
    func pauseAfterReadTurn() {
        peeking.removeAll { connection in
            if connection.peekFresh, connection.peeking {
                connection.peekFresh = false
                return false
            }
            connection.peeking = false
            connection.peekFresh = false
            if connections[connection.id] === connection, connection.lazyReceive, connection.pendingClose == nil,
               let wsi = connection.wsi {
                lws_rx_flow_control(wsi, 0)
            }
            return true
        }
    }

    /// The socket holds at least one unread byte (or a pending error or end of stream, which lws must see).
    static func socketHasInput(_ wsi: OpaquePointer) -> Bool {
        let fd = lws_get_socket_fd(wsi)
        guard fd >= 0 else { return false }
        var byte: UInt8 = 0
        let got = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        if got >= 0 { return true }  // bytes, or the end of the stream (0): lws must read it to see the close
        let error = errno
        return error != EAGAIN && error != EWOULDBLOCK && error != EINTR  // an error, for lws to report
    }
}
