// libFuzzer target: WebSocket message reassembly (`MessageReassembler`), fed what libwebsockets hands the
// RECEIVE callback; every value in it (flags, announced remaining length, payload) is the peer's choice.
// Built only by `make fuzz` (Fuzz/run.sh); a normal `swift build` links it with an empty main.
//
// Input: byte 0 picks the size limit (0: 65,535, the protocol's; else that many bytes, so the limit is reached
// often), then callbacks, each: 1 flag byte (bit 0 binary, bit 1 final fragment, bits 2-3 how the announced
// remaining length is read: 0 = none, 1 = one byte, 2 = two bytes, 3 = eight bytes big-endian with bit 63
// cleared, as lws never passes a header with it set), that length, 1 byte n, n payload bytes.
// Invariants, checked against a model that computes in wide (UInt64, overflow-reported) arithmetic: a refusal
// comes exactly when the frame is not binary (1003) or held + this callback + announced exceeds the limit
// (1009), and stays; a message comes exactly on a final fragment with nothing more announced, and is the
// concatenation of the payloads since the last message, never longer than the limit; nothing traps.
import SpeakBridgeWebSocket

struct Reader {
    var bytes: ArraySlice<UInt8>
    mutating func take(_ n: Int) -> [UInt8]? {
        guard bytes.count >= n else { return nil }
        defer { bytes = bytes.dropFirst(n) }
        return Array(bytes.prefix(n))
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMessageReassembler(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = Reader(bytes: Array(UnsafeBufferPointer(start: data, count: size))[...])
    guard let limitByte = input.take(1)?.first else { return 0 }
    let limit = limitByte == 0 ? 65_535 : Int(limitByte)
    var assembler = MessageReassembler(maxMessageSize: limit)
    var held: [UInt8] = []          // the model's view of the message so far
    var refusal: MessageReassembler.Step?
    while let flags = input.take(1)?.first {
        let binary = flags & 1 == 1, final = flags & 2 == 2
        let announced: UInt64
        switch (flags >> 2) & 3 {
        case 0: announced = 0
        case 1: guard let b = input.take(1) else { return 0 }; announced = UInt64(b[0])
        case 2: guard let b = input.take(2) else { return 0 }; announced = UInt64(b[0]) << 8 | UInt64(b[1])
        default:
            guard let b = input.take(8) else { return 0 }
            announced = b.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } & ~(UInt64(1) << 63)
        }
        guard let n = input.take(1)?.first, let payload = input.take(Int(n)) else { return 0 }
        let step = assembler.receive(isBinary: binary, isFinalFragment: final, bytes: payload, announcedRemaining: announced)

        if let refusal {
            precondition(step == refusal && assembler.isRefused, "a refusal did not stay")
            continue
        }
        let total = UInt64(held.count + payload.count)  // both bounded by the input size: cannot overflow
        let (wanted, overflow) = total.addingReportingOverflow(announced)
        let tooBig = overflow || wanted > UInt64(limit)
        switch step {
        case .refuse(let code, _):
            precondition(code == (binary ? 1009 : 1003), "refused with \(code)")
            precondition(!binary || tooBig, "refused a message within the limit")
            precondition(assembler.buffered.isEmpty, "a refused assembler kept bytes")
            refusal = step
        case .needMore:
            precondition(binary && !tooBig, "accepted a text frame or a message over the limit")
            precondition(!(final && announced == 0), "a complete message was held back")
            held += payload
            precondition(assembler.buffered == held, "buffered bytes differ from the payloads received")
        case .message(let message):
            precondition(binary && !tooBig && final && announced == 0, "delivered a message that is not complete or too big")
            precondition(message == held + payload, "the message is not the concatenation of its payloads")
            precondition(message.count <= limit, "a message over the limit")
            precondition(assembler.buffered.isEmpty, "bytes left over after a message")
            held = []
        }
    }
    return 0
}
