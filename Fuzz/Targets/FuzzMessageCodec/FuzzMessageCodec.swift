// libFuzzer target: the message codec (`MessageCodec.decode`), the first thing every decrypted frame meets.
// Built only by `make fuzz` (Fuzz/run.sh); a normal `swift build` links it with an empty main.
//
// Invariants beyond "no crash": a message that decodes encodes to a canonical frame that decodes again; the
// canonical frame is a fixed point; and every message but `config-*` (whose body keeps the peer's member order)
// is equal after the round trip. A canonical frame longer than one frame (numbers grow when re-spelled) is only
// checked for the first two. The client's ack fast path (`CanonicalAck`) answers nil or exactly what `decode` does.
import SpeakBridgeProtocol

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMessageCodec(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let decoded = try? MessageCodec.decode(bytes)
    if let fast = CanonicalAck.decode(bytes) {
        precondition(fast == decoded, "the ack fast path read \(fast) where decode read \(String(describing: decoded))")
    }
    guard let message = decoded else { return 0 }
    let canonical = MessageCodec.encode(message)
    guard canonical.count <= SpeakBridgeProtocol.maxFrameSize else { return 0 }
    let again: Message
    do {
        again = try MessageCodec.decode(canonical)
    } catch {
        fatalError("canonical frame of a decoded \(message.type) does not decode: \(error)")
    }
    precondition(again.type == message.type, "message type changed in a round trip")
    precondition(MessageCodec.encode(again) == canonical, "canonical \(message.type) frame is not a fixed point")
    if case .config = message { return 0 }
    precondition(again == message, "\(message.type) changed in a decode → encode → decode round trip")
    return 0
}
