// CRC-32 as used by zlib, gzip, PNG and IEEE 802.3: reflected polynomial 0xEDB88320, initial value and final
// XOR 0xFFFFFFFF. The pairing code uses it to catch typing and copying mistakes; it is not a security measure
// (the pairing secret and the Noise handshake are).

/// CRC-32 (IEEE 802.3, as in zlib). `CRC32.checksum(Array("123456789".utf8)) == 0xCBF43926`.
public enum CRC32 {
    /// The CRC-32 of `bytes`.
    public static func checksum(_ bytes: some Sequence<UInt8>) -> UInt32 {
        update(0, with: bytes)
    }

    /// Continues a checksum: `update(checksum(a), with: b) == checksum(a + b)`; start from 0.
    public static func update(_ crc: UInt32, with bytes: some Sequence<UInt8>) -> UInt32 {
        let table = Self.table
        var state = ~crc
        for byte in bytes {
            state = table[Int(UInt8(truncatingIfNeeded: state) ^ byte)] ^ (state >> 8)
        }
        return ~state
    }

    /// The bit-reversed form of the IEEE polynomial 0x04C11DB7.
    static let polynomial: UInt32 = 0xEDB8_8320

    /// One entry per byte value: the register after shifting that byte through it eight times.
    /// A `static let` is initialised once, thread-safely, at first use.
    private static let table: [UInt32] = (0...255).map { (index: UInt32) in
        var value = index
        for _ in 0..<8 {
            value = (value & 1 == 1) ? (value >> 1) ^ polynomial : value >> 1
        }
        return value
    }
}
