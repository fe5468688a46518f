// The sending half of the service loop: frames out of a connection's queue, and close
// frames. Runs on the service thread only.
//
// One WRITEABLE callback writes up to `framesPerWriteable` frames, each copied behind
// LWS_PRE bytes of headroom, and stops early once lws reports a partially buffered frame
// (lws_partial_buffered: no more lws_write until lws calls back). If anything is left, it
// asks for another WRITEABLE. A pending application close is sent only once the queue is
// empty, so it never overtakes queued messages.
//
// A frame skips the queue when nothing is ahead of it (`writeNow`), on a client's connection and on a
// server's alike (acks, resume answers, config messages): it is written in the loop turn that
// produced it, with no WRITEABLE round trip (one poll(2) wake-up, lws's POLLOUT handling and a
// callback per frame). A frame another thread sends (an ack from the committer) is written in the
// drain of the EVENT_WAIT_CANCELLED its enqueue caused. lws 4.1 takes an lws_write outside
// WRITEABLE: what the socket does not take it keeps (buflist_out) and flushes on POLLOUT before any
// WRITEABLE; while it holds such a rest (lws_partial_buffered) frames queue as before, so order
// never changes and the queue's bound (`maxQueuedBytes`) applies as before.
//
// A client's frame is built whole here (`ClientFrame`: header, masking key from `MaskingKeys`, payload masked
// eight bytes at a time) and handed to lws as raw bytes; a server's frame is framed by lws (servers do not mask).
internal import CLibWebSockets

extension ServiceLoop {
    /// Frames to write per WRITEABLE callback at most, so that one busy connection cannot
    /// starve the others.
    static let framesPerWriteable = 64

    func writeable(_ wsi: OpaquePointer) -> Int32 {
        guard let connection = connection(for: wsi) else { return 0 }
        var frames = 0
        while frames < ServiceLoop.framesPerWriteable, let message = connection.nextOutgoing {
            guard write(message, on: connection, wsi) else {
                connection.closeReason = "connection lost"
                return -1
            }
            connection.dropFirstOutgoing()
            frames += 1
            // lws buffered part of that frame: no more writes until it calls us again.
            if lws_partial_buffered(wsi) != 0 {
                break
            }
        }
        if connection.hasOutgoing {
            lws_callback_on_writable(wsi)
            return 0
        }
        if frames == 0, let pending = connection.pendingClose {
            if connection.lingersOnClose { return closeAndLinger(connection, wsi, code: pending.code, reason: pending.reason) }
            sendCloseFrame(wsi, code: pending.code, reason: pending.reason)
            return -1
        }
        if connection.pendingClose != nil {
            lws_callback_on_writable(wsi)
        }
        return 0
    }

    /// Writes a frame at once if nothing is ahead of it: the connection is established, no frame of
    /// its own is queued, no close is pending and lws holds no unsent rest of an earlier frame. False: not
    /// written (queue it). A failed write marks the connection lost and has lws drop it; the frame counts as
    /// taken, like one a WRITEABLE callback failed to write (the connection's `.closed` follows).
    func writeNow(_ message: [UInt8], on connection: Connection) -> Bool {
        guard connection.isEstablished, !connection.hasOutgoing, connection.pendingClose == nil,
              let wsi = connection.wsi, lws_partial_buffered(wsi) == 0 else { return false }
        directWrites.add(1, ordering: .relaxed)
        if !write(message, on: connection, wsi) {
            // Not inside this wsi's callback, so it cannot return -1: lws closes it at its next timeout check. A
            // reason already known (the peer started closing, and lws takes no more frames) is kept.
            if connection.closeReason == nil { connection.closeReason = "connection lost" }
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
        }
        return true
    }

    /// Writes one binary frame. False means the connection is broken.
    func write(_ message: [UInt8], on connection: Connection, _ wsi: OpaquePointer) -> Bool {
        if connection.isClient { return writeMasked(message, keys: connection.maskingKeys, wsi) }
        let headroom = Int(SWIFT_LWS_PRE)
        let payload = scratchSpace(headroom + message.count).baseAddress!.advanced(by: headroom)
        message.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress {
                payload.copyMemory(from: base, byteCount: bytes.count)
            }
        }
        let written = lws_write(wsi, payload.assumingMemoryBound(to: UInt8.self), message.count, LWS_WRITE_BINARY)
        // lws buffers what the socket did not take, so anything short of the full length is
        // an error.
        return Int(written) >= message.count
    }

    /// A client's frame, framed and masked here and written raw (see `ClientFrame` for why that is safe with lws's
    /// own frames). False means the connection is broken.
    func writeMasked(_ message: [UInt8], keys: MaskingKeys, _ wsi: OpaquePointer) -> Bool {
        // A message is at most a frame the application may send (an array: far below Int.max - 14).
        let length = ClientFrame.headerSize(payloadCount: message.count) + message.count
        let frame = scratchSpace(length).baseAddress!
        let built = message.withUnsafeBytes { ClientFrame.write(payload: $0, key: keys.take(), into: frame) }
        // LWS_WRITE_HTTP (LWS_WRITE_RAW): `lws_issue_raw` as is; what the socket does not take lws keeps and sends
        // first, and it returns the whole length then.
        let written = lws_write(wsi, frame.assumingMemoryBound(to: UInt8.self), built, LWS_WRITE_HTTP)
        return Int(written) >= built
    }

    /// The loop's scratch buffer, grown to at least `count` bytes.
    func scratchSpace(_ count: Int) -> UnsafeMutableRawBufferPointer {
        if scratch.count < count {
            scratch.deallocate()
            scratch = .allocate(byteCount: max(count, 2 * scratch.count), alignment: 16)
        }
        return scratch
    }

    func sendCloseFrame(_ wsi: OpaquePointer, code: UInt16, reason: String) {
        var bytes = Self.closeReasonBytes(reason)
        bytes.withUnsafeMutableBufferPointer { buffer in
            lws_close_reason(wsi, lws_close_status(rawValue: UInt32(code)), buffer.baseAddress, buffer.count)
        }
    }

    /// A close frame's reason: at most 123 bytes (the payload is 2 bytes of code and at most 123 of reason, RFC 6455
    /// §5.5), cut between scalars.
    static func closeReasonBytes(_ reason: String) -> [UInt8] {
        var bytes = Array(reason.utf8.prefix(123))
        while !bytes.isEmpty, String(validating: bytes, as: UTF8.self) == nil {
            bytes.removeLast()
        }
        return bytes
    }

    /// Seconds a server connection lingers after its close frame for the peer's (`closeAndLinger`).
    static let lingerSeconds: Int32 = 2
    /// Server connections that may linger at once (`lingering`); a close beyond them is immediate.
    static let maxLingering = 64

    /// Server, a close the application asked for: the close frame goes out, and the connection stays open reading
    /// (and dropping, `receive`) what the peer still sends until its close frame answers ours — then lws closes
    /// without another (`peerStartedClose`) — or `lingerSeconds` pass. Why: lws 4.1 closes the socket right after
    /// its close frame, and bytes the peer had sent meanwhile, left unread, made the kernel answer with a TCP reset,
    /// which can discard what was still on its way to the peer: the `error` before the close (a refused chunk's,
    /// Pairing/PROTOCOL.md "Errors") and the close frame itself. A peer that answers sends nothing after its close
    /// frame, so the socket closes with nothing unread. The frame is built here (a server's frames are not masked)
    /// and written raw, so that lws does not take the connection for closing. A paused connection is read again.
    func closeAndLinger(_ connection: Connection, _ wsi: OpaquePointer, code: UInt16, reason: String) -> Int32 {
        guard !connection.closeFrameSent else { return 0 }
        let reasonBytes = Self.closeReasonBytes(reason)
        let headroom = Int(SWIFT_LWS_PRE)
        let length = 4 + reasonBytes.count  // 0x88, length (≤ 125, unmasked), code, reason
        let frame = scratchSpace(headroom + length).baseAddress!.advanced(by: headroom).assumingMemoryBound(to: UInt8.self)
        frame[0] = 0x88
        frame[1] = UInt8(2 + reasonBytes.count)
        frame[2] = UInt8(code >> 8)
        frame[3] = UInt8(code & 0xFF)
        for (index, byte) in reasonBytes.enumerated() { frame[4 + index] = byte }
        guard Int(lws_write(wsi, frame, length, LWS_WRITE_HTTP)) >= length else {
            connection.closeReason = connection.closeReason ?? "connection lost"
            return -1
        }
        connection.closeFrameSent = true
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, Self.lingerSeconds)
        if connection.receivePaused {
            connection.receivePaused = false
            connection.validityRefresh = nil
            lws_rx_flow_control(wsi, 1)
        }
        return 0
    }
}
