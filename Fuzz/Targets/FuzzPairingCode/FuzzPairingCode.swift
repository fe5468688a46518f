// libFuzzer target: the pairing code parser (`PairingCode.parse`), which reads whatever a camera or a paste hands
// the client. Built only by `make fuzz` (Fuzz/run.sh); a normal `swift build` links it with an empty main.
//
// Invariants beyond "no crash": a code that parses encodes to a canonical text that parses to the same fields,
// and the canonical text is a fixed point (encode ∘ parse ∘ encode = encode).
import SpeakBridgeProtocol

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPairingCode(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    // Bound the input like a pasted line: the parser itself has no length limit, and a code is < 300 bytes.
    guard size <= 4_096 else { return -1 }
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    guard let code = try? PairingCode.parse(text) else { return 0 }
    let canonical = code.encoded()
    let again: PairingCode
    do {
        again = try PairingCode.parse(canonical)
    } catch {
        fatalError("canonical text of a parsed code does not parse: \(error) [\(canonical)]")
    }
    precondition(again.publicKey == code.publicKey && again.secret == code.secret && again.expiry == code.expiry
                     && again.port == code.port && again.addresses == code.addresses,
                 "pairing code fields changed in a parse → encode → parse round trip [\(canonical)]")
    precondition(again.encoded() == canonical, "canonical pairing code text is not a fixed point [\(canonical)]")
    return 0
}
