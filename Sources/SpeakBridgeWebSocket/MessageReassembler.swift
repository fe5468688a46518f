/// Reassembles WebSocket messages from what libwebsockets hands over per RECEIVE callback, and decides when a
/// peer has sent something this side refuses. A pure value: no lws, no sockets, so it can be unit-tested and
/// fuzzed byte by byte.
///
/// Feed it one ``receive(isBinary:isFinalFragment:bytes:announcedRemaining:)`` call per RECEIVE callback:
/// - `isBinary`: `lws_frame_is_binary` — the message's first frame was binary (continuations inherit it).
/// - `isFinalFragment`: `lws_is_final_fragment` — FIN was set on this frame *and* none of its payload is
///   still to come. The message is complete only then (and only when `announcedRemaining` is 0).
/// - `bytes`: the payload bytes of this callback (lws gives at most `rx_buffer_size` at a time).
/// - `announcedRemaining`: `lws_remaining_packet_payload` — how much more payload the current frame's header
///   announced and has not arrived yet. A peer chooses it: any value up to 2^63 − 1 (lws drops a header with
///   bit 63 set before we see it), and the type takes the full `UInt64` range without trapping.
///
/// Size rule: the bytes already held for this message + this callback's bytes + what the frame still announces
/// must not exceed `maxMessageSize`; otherwise the result is `.refuse(1009)` — so an oversize frame is refused at
/// its first callback, before any more of its payload is buffered. A text (non-binary) frame is refused with
/// 1003. Nothing here uses a trapping operator on a peer-chosen value: every comparison is arranged so that it
/// cannot overflow, and the buffer never holds more than `maxMessageSize` bytes.
///
/// After a refusal the assembler stays refused (every later call returns the same refusal); the caller closes
/// the connection.
public struct MessageReassembler: Sendable {
    /// What one callback's input led to.
    public enum Step: Equatable, Sendable {
        /// The message is not complete yet.
        case needMore
        /// A complete message (possibly empty).
        case message([UInt8])
        /// The peer broke a rule; close with `code` (1003 or 1009) and `reason`.
        case refuse(code: UInt16, reason: String)
    }

    /// Largest message in bytes (never negative).
    public let maxMessageSize: Int
    /// The part of the current message received so far; never longer than `maxMessageSize`.
    public private(set) var buffered: [UInt8] = []
    private var refusal: Step?

    public init(maxMessageSize: Int) {
        self.maxMessageSize = max(0, maxMessageSize)
    }

    /// The most a frame's announcement reserves before its bytes arrive (a desktop frame is at most 64 KiB).
    static let maxReservation = 1 << 17

    /// True once a refusal was returned.
    public var isRefused: Bool { refusal != nil }

    public mutating func receive(
        isBinary: Bool, isFinalFragment: Bool, bytes: UnsafeRawBufferPointer, announcedRemaining: UInt64
    ) -> Step {
        if let refusal { return refusal }
        guard isBinary else {
            return refuse(code: 1003, reason: "binary frames only")
        }
        // room >= 0 because buffered.count <= maxMessageSize always holds.
        let room = maxMessageSize - buffered.count
        guard bytes.count <= room else {
            return refuse(code: 1009, reason: "message too big")
        }
        // Compared as UInt64 so that no announced value can overflow or trap a conversion.
        guard announcedRemaining <= UInt64(room - bytes.count) else {
            return refuse(code: 1009, reason: "message too big")
        }
        if buffered.isEmpty {
            // A whole message in one callback: its array, made at its size (no buffer grown and handed over).
            if isFinalFragment && announcedRemaining == 0 { return .message(Array(bytes)) }
            // The first part of a longer frame: room for what the frame announced, so the buffer is not grown
            // (and copied) by doubling as the rest arrives; a burst's 64 KiB frames were copied about twice over.
            // At most `room` (checked above, so neither the conversion nor the sum can trap): never more than
            // `maxMessageSize`, the bound the buffer already had; and never more than `maxReservation` up front
            // (a limit of `Int.max` must not turn a peer's announcement into an allocation of that size).
            buffered.reserveCapacity(min(bytes.count + Int(announcedRemaining), Self.maxReservation))
        }
        buffered.append(contentsOf: bytes)
        guard isFinalFragment, announcedRemaining == 0 else {
            return .needMore
        }
        let message = buffered
        buffered = []
        return .message(message)
    }

    /// Convenience for tests and fuzzing.
    public mutating func receive(
        isBinary: Bool, isFinalFragment: Bool, bytes: [UInt8], announcedRemaining: UInt64
    ) -> Step {
        bytes.withUnsafeBytes {
            receive(isBinary: isBinary, isFinalFragment: isFinalFragment, bytes: $0, announcedRemaining: announcedRemaining)
        }
    }

    private mutating func refuse(code: UInt16, reason: String) -> Step {
        let step = Step.refuse(code: code, reason: reason)
        refusal = step
        buffered = []
        return step
    }
}
