/// An unsigned integer's decimal digits as ASCII bytes, `String(value)`'s without the String: the one digit writer
/// of the hand-written encoders (acks, progress records, journal ack records). Most significant first, no leading
/// zeros, "0" for zero; written backwards into 24 bytes of stack scratch (`UInt64.max` has 20 digits) and appended
/// once: no allocation.
public enum ASCIIDecimal {
    public static func append(_ value: UInt64, to out: inout [UInt8]) {
        var scratch: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &scratch) { buffer in
            var rest = value
            var i = buffer.count
            repeat {
                i -= 1
                buffer[i] = UInt8(truncatingIfNeeded: 0x30 &+ rest % 10)
                rest /= 10
            } while rest > 0
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[i...]))
        }
    }
}
