// What the service loop does inside lws callbacks. Everything here runs on the service
// thread.
//
// Flow of one callback (from lws, or from our deadline timer):
// 1. `withCallbackScope` counts the nesting depth: lws calls back re-entrantly from some lws
//    calls we make (connect, close).
// 2. `handle` dispatches on the reason: server admission and upgrade (ServiceLoop+Server.swift),
//    client establishment (ServiceLoop+Client.swift), RECEIVE (through the connection's
//    MessageReassembler), WRITEABLE (ServiceLoop+Writing.swift), closes.
// 3. When the outermost callback returns, `drainInbox` runs the commands enqueued meanwhile by
//    event handlers on this thread and by other threads alike, in the one FIFO order of
//    `enqueue`. EVENT_WAIT_CANCELLED (the wake-up another thread's enqueue causes) does nothing
//    else: it is a callback whose exit drains.
//
// Connection lifecycle as lws reports it:
//   server: FILTER_NETWORK_CONNECTION (per-address limit) → SERVER_NEW_CLIENT_INSTANTIATED
//           (admission; the handshake deadline starts) → HTTP_CONFIRM_UPGRADE (path,
//           subprotocol; else an HTTP error status) → FILTER_PROTOCOL_CONNECTION → ESTABLISHED
//           (`.opened`) → RECEIVE* / SERVER_WRITEABLE* → [WS_PEER_INITIATED_CLOSE] → CLOSED →
//           WSI_DESTROY. A connection that ends before ESTABLISHED is never reported.
//   client: (connect command) → CLIENT_FILTER_PRE_ESTABLISH (the server's chosen subprotocol noted) →
//           CLIENT_ESTABLISHED → CLIENT_RECEIVE* / CLIENT_WRITEABLE* →
//           [WS_PEER_INITIATED_CLOSE] → CLIENT_CLOSED → WSI_DESTROY,
//           or CLIENT_CONNECTION_ERROR → WSI_DESTROY
// A wsi is tied to its Connection through lws's opaque user data, which holds the
// connection ID (never a Swift reference).
internal import CLibWebSockets
import Synchronization
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
    /// Runs one entry from lws; when the outermost one ends, runs the commands enqueued
    /// meanwhile (from handlers on this thread and from other threads, in FIFO order).
    func withCallbackScope<R>(_ body: () -> R) -> R {
        callbackDepth += 1
        let result = body()
        if callbackDepth == 1 {
            drainInbox()
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
            // The inbox is drained when this callback returns (withCallbackScope).
            return 0
        case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
            // `input` carries the accepted socket's fd (lws passes it as a pointer-sized integer).
            let fd = Int32(truncatingIfNeeded: Int(bitPattern: input))
            return acceptsNetworkConnection(fd) ? 0 : 1
        case LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED:
            return serverAccepted(wsi) ? 0 : -1
        case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
            return confirmUpgrade(wsi, input)
        case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
            return acceptsUpgrade(wsi) ? 0 : 1
        case LWS_CALLBACK_ESTABLISHED:
            return serverEstablished(wsi) ? 0 : -1
        case LWS_CALLBACK_CLIENT_FILTER_PRE_ESTABLISH:
            clientAnswered(wsi)
            return 0
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            clientEstablished(wsi)
            return 0
        case LWS_CALLBACK_RECEIVE, LWS_CALLBACK_CLIENT_RECEIVE:
            return receive(wsi, input, length)
        case LWS_CALLBACK_SERVER_WRITEABLE, LWS_CALLBACK_CLIENT_WRITEABLE:
            return writeable(wsi)
        case LWS_CALLBACK_RAW_RX_FILE:
            return watchedReadable(wsi)
        case LWS_CALLBACK_RAW_CLOSE_FILE:
            watchedClosed(wsi)
            return 0
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            // Nonzero: lws closes without echoing a close frame (ours went out already: `closeAndLinger`).
            return peerStartedClose(wsi, input, length) ? 1 : 0
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
            // Plain HTTP is not served (only WebSocket upgrades), except the TLS listener's file mount, which lws
            // answers itself; it calls here for a file the mount does not have: a 404 there, a hang-up elsewhere.
            if lws_is_ssl(wsi) != 0 {
                _ = lws_return_http_status(wsi, 404, nil)
            }
            return -1
        case LWS_CALLBACK_HTTP_FILE_COMPLETION:
            // One file per connection: closing frees its unauthenticated slot at once instead of holding it
            // until the handshake deadline (a page load opens several connections from one address).
            return -1
        default:
            return lws_callback_http_dummy(wsi, reason, user, input, length)
        }
    }

    // MARK: commands

    /// Rounds of draining per callback exit; if other threads keep the inbox full beyond that,
    /// lws gets to serve the sockets first and we come back through EVENT_WAIT_CANCELLED.
    static let drainRounds = 4

    func drainInbox() {
        for _ in 0..<ServiceLoop.drainRounds {
            // Nothing enqueued (the usual callback exit): no lock (`inboxHasCommands`).
            guard inboxHasCommands.load(ordering: .acquiring) else { return }
            // Two arrays take turns (the inbox's and `drained`), so a command per loop turn allocates none.
            withInbox {
                swap(&drained, &$0.commands)
                inboxHasCommands.store(false, ordering: .releasing)
            }
            if drained.isEmpty { return }
            for command in drained {
                apply(command)
            }
            if drained.capacity > 256 {
                drained = []  // after a burst: not kept at its peak size
            } else {
                drained.removeAll(keepingCapacity: true)
            }
        }
        guard inboxHasCommands.load(ordering: .acquiring) else { return }
        withInbox { inbox in
            // Producers only wake us when the inbox was empty, so a non-empty one left behind
            // needs a wake-up from here.
            if !inbox.commands.isEmpty, let context = inbox.context {
                lws_cancel_service(context.pointer)
            }
        }
    }

    func apply(_ command: Command) {
        switch command {
        case let .send(id, message):
            applySend(message, on: id)
        case let .close(id, code, reason):
            guard let connection = connections[id] else { return }
            // Only a peer that proved its key: an unauthenticated one has nothing of ours to lose, and holds an
            // unauthenticated slot no longer than it must. And at most `maxLingering` at once: a paired device that
            // opens connection after connection (its ninth closes its oldest) cannot pile up descriptors 2 s each;
            // past the bound a close is immediate, as before lingering.
            if connection.pendingClose == nil && connection.isAuthenticated && lingering < Self.maxLingering {
                connection.lingersOnClose = true
                lingering += 1
            }
            close(connection, code: code, reason: reason)
        case let .markAuthenticated(id, groupName):
            guard let connection = connections[id], !connection.isClient, connection.isEstablished else { return }
            connection.isAuthenticated = true
            if let groupName, let configuration = serverConfiguration {
                let group = outgoingGroups[groupName] ?? OutgoingGroup(name: groupName,
                                                                        limit: configuration.maxQueuedBytesPerGroup)
                outgoingGroups[groupName] = group
                connection.join(group)
            }
            admission.remove(id)
            authenticatedMarks.add(1, ordering: .relaxed)
            if connection.deadline != nil {
                connection.deadline = nil
                rescheduleDeadlineTimer()
            }
        case let .setReceiving(id, enabled):
            // A lingering close reads on whatever the application says (`closeAndLinger`).
            guard let connection = connections[id], connection.isEstablished, !connection.lingersOnClose,
                  let wsi = connection.wsi else { return }
            // Frames lws already read stay buffered and are delivered after a resume; no new bytes are read
            // from the socket meanwhile, so the peer's TCP window fills and it is held back by the kernel.
            lws_rx_flow_control(wsi, enabled ? 1 : 0)
            if !connection.isClient { setValidityKept(connection, wsi, paused: !enabled) }
        case let .receiveLazily(id, lazy):
            setLazy(id, lazy)
        case let .receivePending(id):
            readPending(id)
        case let .connect(id, request):
            connect(id, request)
        case let .startSecure(request):
            // Not here, inside an lws callback: `run()` creates the vhost once this `lws_service` call returns.
            pendingSecureStarts.append(request)
        case let .watch(request):
            request.answer(adopt(request))
        case let .schedule(request):
            arm(request)
        case .stop:
            beginStop()
        }
    }

    /// `.send`: written in this loop turn when nothing is ahead of it (either role), else queued for WRITEABLE. A
    /// server's ack made on another thread gets here in the drain of the EVENT_WAIT_CANCELLED its enqueue caused,
    /// so it needs no further turn.
    func applySend(_ message: [UInt8], on id: WebSocketConnectionID) {
        guard let connection = self.connection(id), connection.pendingClose == nil else { return }
        if writeNow(message, on: connection) { return }
        guard connection.enqueue(message) else {
            // The peer keeps asking but does not read (on this connection, or on all of its group's together):
            // drop what it did not take and close, rather than buffer without bound.
            connection.dropAllOutgoing()
            close(connection, code: 1008, reason: "not reading")
            return
        }
        requestWriteable(connection)
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

    /// Forgets a connection without a close handshake (not established yet, or evicted),
    /// reports it closed if the application knows it, and lets lws drop the socket at its next
    /// timeout check (the next service round).
    func abandon(_ connection: Connection, reason: String) {
        forget(connection)
        if let wsi = connection.wsi {
            lws_set_opaque_user_data(wsi, nil)
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
        }
        if connection.isAnnounced {
            emit(.closed(connection.id, reason: reason))
        }
    }

    /// Drops every record of a connection (the wsi is left to the caller).
    private func forget(_ connection: Connection) {
        if connection.lingersOnClose { lingering -= 1 }
        removeConnection(connection.id)
        connectionInfo.withLock { $0[connection.id] = nil }
        admission.remove(connection.id)
        if connection.deadline != nil {
            rescheduleDeadlineTimer()
        }
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
        confirmPausedValidity(now: now)
        for connection in due {
            connection.deadline = nil
            if connection.isClient {
                abandon(connection, reason: "connect timeout")
            } else if !connection.isAuthenticated {
                // An upgraded connection gets a close frame (and counts as unauthenticated until
                // it is gone); one still in its HTTP upgrade is just dropped.
                close(connection, code: 1008, reason: "handshake timeout")
            }
        }
        rescheduleDeadlineTimer()
    }

    /// Server: reading `connection` was paused (`paused`) or resumed by the application. A paused connection's PONGs
    /// wait unread in the kernel, and lws's validity policy would hang it up `hangupAfter` seconds after its last
    /// confirmed sign of life (close 1006, no close frame) although the peer may be alive and answering: the loop
    /// confirms its validity now and every `validityRefreshInterval` while it stays paused, and sends the peer an
    /// unsolicited PONG each time (`confirmPausedValidity`). On resume it confirms once more, so the peer gets the
    /// full `hangupAfter` from then (its PONGs are read again), and the usual policy applies.
    func setValidityKept(_ connection: Connection, _ wsi: OpaquePointer, paused: Bool) {
        guard connection.receivePaused != paused else { return }
        connection.receivePaused = paused
        lws_validity_confirmed(wsi)
        if paused, connection.isEstablished, connection.pendingClose == nil { sendHeartbeat(wsi) }
        connection.validityRefresh = paused ? monotonicNanoseconds() + validityRefreshInterval : nil
        rescheduleDeadlineTimer()
    }

    /// A quarter of the hang-up time (at least a quarter of a second), in nanoseconds: confirmed three times over
    /// before lws would hang up, so a service thread held off the CPU for a while (a loaded machine: the full test
    /// suite hung one up at half) still comes in time.
    var validityRefreshInterval: UInt64 {
        guard case let .server(configuration) = role else { return 7_500_000_000 }
        return max(250_000_000, UInt64(configuration.hangupAfter) * 250_000_000)
    }

    /// From the deadline timer: confirms the validity of every paused server connection whose refresh is due, and
    /// gives the peer a sign of life of its own: an unsolicited PONG (RFC 6455 §5.5.3: "a unidirectional
    /// heartbeat"). The peer's PINGs wait unread behind its data while we do not read, so without it a client whose
    /// liveness check wants an answer (lws's validity policy: a PONG within `hangupAfter`, the reference `send`'s 30 s)
    /// would hang up a connection we only paused, reconnect, and resend its whole window into the same pause.
    func confirmPausedValidity(now: UInt64) {
        for connection in connections.values {
            guard let refresh = connection.validityRefresh, refresh <= now else { continue }
            guard connection.receivePaused, connection.pendingClose == nil, let wsi = connection.wsi else {
                connection.validityRefresh = nil
                continue
            }
            lws_validity_confirmed(wsi)
            sendHeartbeat(wsi)
            connection.validityRefresh = now + validityRefreshInterval
        }
    }

    /// An empty PONG, framed by lws. Written outside a WRITEABLE callback as `writeNow` does: behind whatever rest
    /// of an earlier frame lws still holds, and between whole frames of ours (each message is one frame), where
    /// RFC 6455 allows a control frame. A failed write is the connection's end, which lws finds on its own.
    private func sendHeartbeat(_ wsi: OpaquePointer) {
        let headroom = Int(SWIFT_LWS_PRE)
        let frame = scratchSpace(headroom + 1).baseAddress!.advanced(by: headroom)
        _ = lws_write(wsi, frame.assumingMemoryBound(to: UInt8.self), 0, LWS_WRITE_PONG)
    }

    // MARK: both sides

    func connection(for wsi: OpaquePointer) -> Connection? {
        guard let raw = lws_get_opaque_user_data(wsi) else { return nil }
        return self.connection(WebSocketConnectionID(rawValue: UInt64(UInt(bitPattern: raw))))
    }

    /// One RECEIVE callback: its bytes go through the connection's reassembler, which also
    /// enforces the type and size rules (MessageReassembler.swift).
    private func receive(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        guard let connection = connection(for: wsi) else { return -1 }
        // Closing at the application's word: what the peer still sends is read (so the close is not answered with
        // a reset) and dropped, unparsed.
        if connection.lingersOnClose { return 0 }
        let bytes = UnsafeRawBufferPointer(start: length > 0 ? input : nil, count: input == nil ? 0 : max(0, length))
        // size_t as lws returns it; reinterpreted, never converted with a trapping initializer.
        let remaining = UInt64(UInt(bitPattern: lws_remaining_packet_payload(wsi)))
        let step = connection.incoming.receive(
            isBinary: lws_frame_is_binary(wsi) != 0, isFinalFragment: lws_is_final_fragment(wsi) != 0,
            bytes: bytes, announcedRemaining: remaining)
        switch step {
        case .needMore:
            return 0
        case let .message(message):
            emit(.message(connection.id, message))
            return 0
        case let .refuse(code, reason):
            return fail(connection, wsi, code: code, reason: reason)
        }
    }

    /// Closes right away from inside a callback because of what the peer sent.
    private func fail(_ connection: Connection, _ wsi: OpaquePointer, code: UInt16, reason: String) -> Int32 {
        connection.closeReason = "local close \(code): \(reason)"
        sendCloseFrame(wsi, code: code, reason: reason)
        return -1
    }

    /// The peer's close frame: notes its code and reason for `.closed`, unless ours went first (a lingering
    /// close keeps its own reason). True when our close frame is already out: the peer's is its answer.
    private func peerStartedClose(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Bool {
        guard let connection = connection(for: wsi) else { return false }
        if connection.closeFrameSent { return true }
        guard let input, length >= 2 else {
            connection.closeReason = "peer close 1005"
            return false
        }
        let bytes = UnsafeRawBufferPointer(start: input, count: length)
        let code = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        let text = String(decoding: bytes.dropFirst(2), as: UTF8.self)
        connection.closeReason = text.isEmpty ? "peer close \(code)" : "peer close \(code): \(text)"
        return false
    }

    /// Reports a connection gone (once) and forgets it.
    private func finish(_ wsi: OpaquePointer, reason: String) {
        guard let connection = connection(for: wsi) else { return }
        lws_set_opaque_user_data(wsi, nil)
        forget(connection)
        if connection.isAnnounced {
            emit(.closed(connection.id, reason: connection.closeReason ?? reason))
        }
    }

    // MARK: small lws helpers

    func header(_ wsi: OpaquePointer, _ token: lws_token_indexes) -> String? {
        let total = Int(lws_hdr_total_length(wsi, token))
        guard total > 0, total <= 8192 else { return nil }
        var buffer = [CChar](repeating: 0, count: total + 1)
        let copied = lws_hdr_copy(wsi, &buffer, Int32(buffer.count), token)
        guard copied >= 0 else { return nil }
        return String(decoding: buffer.prefix(Int(copied)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func peerAddress(_ wsi: OpaquePointer) -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        guard lws_get_peer_simple(wsi, &buffer, buffer.count) != nil else { return "" }
        let text = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: text, as: UTF8.self)
    }
}
