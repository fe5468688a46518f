// A client's data frame built whole by us and handed to lws as raw bytes, instead of lws framing and masking it.
//
// Why: lws 4.1 masks every client frame itself — 4 bytes read from /dev/urandom per frame (one read(2) per line
// of a paced stream) and the payload XORed one byte at a time (about 900 instructions a burst line). Here the
// key comes from `MaskingKeys` (a CSPRNG pool) and the payload is copied and masked eight bytes at a time.
//
// How it reaches the wire (lws 4.1.6, lib/roles/ws/ops-ws.c and lib/core-net/output.c): `lws_write` with
// LWS_WRITE_HTTP on a WebSocket connection jumps straight to `send_raw` → `lws_issue_raw`, the same function the
// ws role ends in after framing its own frames. `lws_issue_raw` writes what the socket takes and keeps the rest on
// the connection's `buflist_out`; while that list holds anything, every later `lws_issue_raw` (ours, and lws's own
// control frames: close, pong, ping) is appended behind it, and POLLOUT flushes it first, before any other write
// (`lws_handle_POLLOUT_event`, "Priority 1"). So a frame is never interleaved with another one, whatever wrote
// either. lws's own control frames keep lws's masking path. No extension is negotiated on our connections
// (the context has none), so lws would not have transformed the payload either.

/// RFC 6455 §5.2 framing of one unfragmented binary message from a client: FIN + opcode 2, the MASK bit, a 7-,
/// 16- or 64-bit length, the 4-byte masking key, then the payload XORed with the key (§5.3).
enum ClientFrame {
    /// The bytes before the payload: 2 + 0/2/8 length bytes + 4 masking key bytes.
    static func headerSize(payloadCount count: Int) -> Int {
        (count < 126 ? 2 : count <= 0xFFFF ? 4 : 10) + 4
    }

    /// Writes the whole frame of `payload` masked with `key` (its four bytes in memory order are the key as sent)
    /// at `out`, which must have room for `headerSize(payloadCount:) + payload.count` bytes. Returns the frame's
    /// length.
    static func write(payload: UnsafeRawBufferPointer, key: UInt32, into out: UnsafeMutableRawPointer) -> Int {
        let count = payload.count
        out.storeBytes(of: 0x82, as: UInt8.self)  // FIN, binary
        var at = 2
        if count < 126 {
            out.storeBytes(of: 0x80 | UInt8(count), toByteOffset: 1, as: UInt8.self)
        } else if count <= 0xFFFF {
            out.storeBytes(of: 0x80 | 126, toByteOffset: 1, as: UInt8.self)
            out.storeBytes(of: UInt16(count).bigEndian, toByteOffset: 2, as: UInt16.self)
            at = 4
        } else {
            out.storeBytes(of: 0x80 | 127, toByteOffset: 1, as: UInt8.self)
            // An array's count is at most Int.max, so the top bit (which RFC 6455 requires be 0) is 0.
            out.storeBytes(of: UInt64(count).bigEndian, toByteOffset: 2, as: UInt64.self)
            at = 10
        }
        out.storeBytes(of: key, toByteOffset: at, as: UInt32.self)
        at += 4
        guard let source = payload.baseAddress, count > 0 else { return at }
        let destination = out + at
        // Byte i of the payload is XORed with key byte i % 4; eight bytes at i ≡ 0 (mod 8) take the key twice.
        let wide = UInt64(key) | UInt64(key) << 32
        var i = 0
        while i + 8 <= count {
            let word = source.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            destination.storeBytes(of: word ^ wide, toByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < count {
            let byte = source.load(fromByteOffset: i, as: UInt8.self)
            let mask = UInt8(truncatingIfNeeded: key >> UInt32(8 * (i & 3)))
            destination.storeBytes(of: byte ^ mask, toByteOffset: i, as: UInt8.self)
            i += 1
        }
        return at + count
    }
}
