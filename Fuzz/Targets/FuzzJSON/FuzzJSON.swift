// libFuzzer target: the strict JSON parser (`JSONValue.parse`) that reads every decrypted frame a peer sends.
// Built only by `make fuzz` (Fuzz/run.sh); a normal `swift build` links it with an empty main.
//
// Invariants beyond "no crash": a document that parses encodes to bytes that parse to an equal value, and the
// encoding is a fixed point (encode ∘ parse ∘ encode = encode). The re-parse allows more bytes than the first
// parse because canonical numbers can be longer than their input spelling ("1e5" → "100000.0").
import SpeakBridgeProtocol

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let value = try? JSONValue.parse(bytes) else { return 0 }
    let encoded = value.encoded()
    let again: JSONValue
    do {
        again = try JSONValue.parse(encoded, maxBytes: 1 << 22)
    } catch {
        fatalError("encoding of a parsed JSON value does not parse: \(error)")
    }
    precondition(again == value, "JSON value changed in a parse → encode → parse round trip")
    precondition(again.encoded() == encoded, "JSON encoding is not a fixed point")
    return 0
}
