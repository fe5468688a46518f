// Hex for test vectors, over the one codec in SpeakBridgeSupport.
import SpeakBridgeSupport

extension Array where Element == UInt8 {
    /// Parses lowercase or uppercase hex; traps on malformed input (test vectors are fixed data).
    init(hex: String) {
        guard let bytes = Hex.decode(hex) else { preconditionFailure("malformed hex in a test vector") }
        self = bytes
    }

    var hex: String { Hex.encode(self) }
}
