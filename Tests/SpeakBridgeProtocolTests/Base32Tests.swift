import Testing

@testable import SpeakBridgeProtocol
import SpeakBridgeTestSupport

@Suite("Crockford base32")
struct Base32Tests {
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")

    // Worked by hand, 5 bits per symbol, most significant first:
    //   00 01 02 03 04 = 00000000 00000001 00000010 00000011 00000100
    //                  = 00000 00000 00000 10000 00100 00000 11000 00100
    //                  =   0     0     0     G     4     0     R     4
    //   66 ("f")       = 01100 110|00 (two zero padding bits) = C R
    //   FF             = 11111 111|00                        = Z W
    // and 05 06 07 08 09 = 00000 10100 00011 00000 01110 00010 00000 01001 = 0 M 3 0 E 2 0 9.
    // The rest was checked with Python: base64.b32encode with the alphabet swapped, "=" stripped.
    static let knownAnswers: [([UInt8], String)] = [
        ([], ""),
        ([0x00], "00"),
        ([0xFF], "ZW"),
        ([0x66], "CR"),
        ([0x00, 0x01, 0x02, 0x03, 0x04], "000G40R4"),
        (Array(0x00...0x09), "000G40R40M30E209"),
        (Array("foobar".utf8), "CSQPYRK1E8"),
        ([0xFF, 0xFF, 0xFF, 0xFF, 0xFF], "ZZZZZZZZ"),
    ]

    @Test("known answers", arguments: knownAnswers)
    func knownAnswer(bytes: [UInt8], text: String) throws {
        #expect(CrockfordBase32.encode(bytes) == text)
        #expect(try CrockfordBase32.decode(text) == bytes)
    }

    @Test("round trip of random bytes, lengths 0…40")
    func roundTrip() throws {
        var random = SplitMix64(seed: 0x5B_B32)
        for length in 0...40 {
            for _ in 0..<25 {
                let bytes = random.bytes(length)
                let text = CrockfordBase32.encode(bytes)
                #expect(text.count == (length * 8 + 4) / 5)
                #expect(text.allSatisfy { Self.alphabet.contains($0) })
                #expect(try CrockfordBase32.decode(text) == bytes)
                #expect(try CrockfordBase32.decode(text.lowercased()) == bytes)
            }
        }
    }

    @Test("every symbol stands for its own value")
    func symbolValues() throws {
        // One byte is two symbols: the high 5 bits, then 3 bits and 2 zero bits.
        for value in 0..<32 {
            let byte = UInt8(value << 3)
            #expect(CrockfordBase32.encode([byte]) == "\(Self.alphabet[value])0")
        }
    }

    @Test("tolerant decode: case, O/I/L, spaces, tabs, line breaks and dashes")
    func tolerantDecode() throws {
        let bytes: [UInt8] = Array(0x00...0x09)
        let variants = [
            "000g40r40m30e209",
            "OOOG40R4OM30E2O9",
            "ooog-40r4-0m30-e209",
            "000G 40R4\t0M30\nE209\r\n",
            " -000G40R40M30E209- ",
            "000G40R40M30E2\r\n09",
        ]
        for text in variants {
            #expect(try CrockfordBase32.decode(text) == bytes, "\(text.debugDescription)")
        }
        // I, i, L, l are all 1: 00001 00001 | 00001 000(00) … check through a single byte 0x08 = 00001 000|00.
        for one in ["1", "I", "i", "L", "l"] {
            #expect(try CrockfordBase32.decode("\(one)0") == [0x08])
        }
    }

    @Test("rejects characters outside the alphabet, at their offset")
    func invalidCharacters() {
        for (text, character, offset) in [
            ("U0", Character("U"), 0), ("0u", "u", 1), ("00*0", "*", 2), ("0 0=", "=", 3), ("é0", "é", 0),
            ("0_", "_", 1), ("00\u{0}", "\u{0}", 2), ("0\u{A0}0", "\u{A0}", 1),
        ] {
            #expect(throws: CrockfordBase32.DecodingError.invalidCharacter(character, offset: offset)) {
                try CrockfordBase32.decode(text)
            }
        }
    }

    @Test("rejects symbol counts that no byte string encodes to")
    func invalidLengths() {
        // 1, 3 and 6 symbols (mod 8) leave 5 or more bits over: a whole symbol without a byte.
        for count in [1, 3, 6, 9, 11, 14] {
            #expect(throws: CrockfordBase32.DecodingError.invalidLength(symbolCount: count)) {
                try CrockfordBase32.decode(String(repeating: "0", count: count))
            }
        }
        for count in [0, 2, 4, 5, 7, 8, 10] {
            #expect(throws: Never.self) { try CrockfordBase32.decode(String(repeating: "0", count: count)) }
        }
    }

    @Test("rejects non-zero padding bits, so every byte string has one encoding")
    func strictPadding() throws {
        // Two symbols are one byte and two padding bits: exactly the values with low bits 00 decode.
        for high in Self.alphabet {
            for (value, low) in Self.alphabet.enumerated() {
                let text = "\(high)\(low)"
                if value & 0b11 == 0 {
                    #expect(try CrockfordBase32.encode(CrockfordBase32.decode(text)) == text)
                } else {
                    #expect(throws: CrockfordBase32.DecodingError.nonZeroPadding(offset: 1)) {
                        try CrockfordBase32.decode(text)
                    }
                }
            }
        }
    }
}

@Suite("CRC-32")
struct CRC32Tests {
    /// Bit by bit, straight from the definition, to check the table-driven version against.
    static func reference(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 {
                crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1
            }
        }
        return ~crc
    }

    @Test("check value and known answers (as zlib)")
    func knownAnswers() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([UInt8]()) == 0)
        #expect(CRC32.checksum(Array("a".utf8)) == 0xE8B7_BE43)
        #expect(CRC32.checksum(Array("The quick brown fox jumps over the lazy dog".utf8)) == 0x414F_A339)
    }

    @Test("matches the bitwise definition; update continues a checksum")
    func matchesReference() {
        var random = SplitMix64(seed: 0xC3C3_2)
        for length in 0..<200 {
            let bytes = random.bytes(length)
            #expect(CRC32.checksum(bytes) == Self.reference(bytes))
            let cut = length / 3
            #expect(CRC32.update(CRC32.checksum(bytes[..<cut]), with: bytes[cut...]) == CRC32.checksum(bytes))
        }
    }
}
