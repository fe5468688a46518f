// Crockford's base32 (https://www.crockford.com/base32.html) as used by device IDs and pairing codes:
// - alphabet `0123456789ABCDEFGHJKMNPQRSTVWXYZ` (no I, L, O, U), upper case on output;
// - big-endian bit order: the first symbol carries the five most significant bits of the first byte;
// - no padding symbols: the unused low bits of the last symbol are zero, and decoding insists on that, so every
//   byte string has exactly one encoding;
// - tolerant input: lower case, `O` read as 0, `I` and `L` read as 1 (any case), and space, tab, CR, LF and `-`
//   ignored anywhere. Crockford's optional check symbol is not used.
// Every output symbol is in the QR code alphanumeric set, so encoded text fits QR alphanumeric mode.

/// Crockford base32 without padding or check symbol.
public enum CrockfordBase32 {
    /// The 32 symbols, in value order.
    public static let alphabet: [Character] = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")

    /// Why a string is not valid Crockford base32.
    public enum DecodingError: Error, Equatable, Sendable {
        /// A character that is neither a symbol, an alias (`O`, `I`, `L`, any case) nor ignorable.
        /// `offset` counts `Character`s from the start of the input, from 0.
        case invalidCharacter(Character, offset: Int)
        /// The number of symbols leaves a final symbol that carries no whole byte
        /// (`symbolCount % 8` is 1, 3 or 6): a symbol is missing or there is one too many.
        case invalidLength(symbolCount: Int)
        /// The unused low bits of the last symbol (at `offset`) are not zero; no encoder writes that.
        case nonZeroPadding(offset: Int)
    }

    /// Encodes `bytes` as upper-case symbols, `ceil(8 * count / 5)` of them.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var symbols: [UInt8] = []
        symbols.reserveCapacity((bytes.underestimatedCount * 8 + 4) / 5)
        var buffer: UInt32 = 0  // bits not yet written, right-aligned; fewer than 5 between bytes
        var bitCount = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bitCount += 8
            while bitCount >= 5 {
                bitCount -= 5
                symbols.append(alphabetASCII[Int((buffer >> UInt32(bitCount)) & 0x1F)])
            }
            buffer &= (1 << UInt32(bitCount)) - 1
        }
        if bitCount > 0 {
            // Left-align the last bits in one more symbol; its low bits are the zero padding.
            symbols.append(alphabetASCII[Int((buffer << UInt32(5 - bitCount)) & 0x1F)])
        }
        return String(decoding: symbols, as: UTF8.self)
    }

    /// Decodes tolerant input (see the file comment) strictly: every character must be a symbol, an alias or
    /// ignorable, the number of symbols must be one an encoder produces, and the padding bits must be zero.
    public static func decode(_ text: some StringProtocol) throws(DecodingError) -> [UInt8] {
        let bits: Bits
        do {
            bits = try decodeBits(text)
        } catch {
            throw .invalidCharacter(error.character, offset: error.offset)
        }
        if bits.leftoverBitCount >= 5 {
            throw .invalidLength(symbolCount: bits.symbolCount)
        }
        if bits.leftoverValue != 0, let last = bits.lastSymbolOffset {
            throw .nonZeroPadding(offset: last)
        }
        return bits.bytes
    }

    /// What reading the symbols gave, before the length and padding checks: the pairing code parser uses it
    /// to tell a damaged last symbol from a missing or extra one.
    struct Bits {
        /// The whole bytes.
        var bytes: [UInt8] = []
        /// Number of bits after the last whole byte: 0...7.
        var leftoverBitCount = 0
        /// Their value.
        var leftoverValue: UInt32 = 0
        /// Number of symbols read (ignored characters not counted).
        var symbolCount = 0
        /// `Character` offset of the last symbol, if any.
        var lastSymbolOffset: Int?
        /// The last symbol as written in the input.
        var lastSymbol: Character?
    }

    /// A character that is not a symbol, an alias or ignorable, at a `Character` offset.
    struct InvalidCharacter: Error {
        var character: Character
        var offset: Int
    }

    /// Reads symbols from `text`; only characters that are not symbols, aliases or ignorable are errors.
    /// Offsets count `Character`s and start at `firstOffset` for the first character of `text`.
    static func decodeBits(_ text: some StringProtocol, firstOffset: Int = 0) throws(InvalidCharacter) -> Bits {
        var result = Bits()
        result.bytes.reserveCapacity(text.utf8.count * 5 / 8)
        var buffer: UInt32 = 0  // bits not yet in a byte, right-aligned; fewer than 8 between symbols
        var offset = firstOffset
        for character in text {
            defer { offset += 1 }
            if isIgnorable(character) { continue }
            guard let value = value(of: character) else {
                throw InvalidCharacter(character: character, offset: offset)
            }
            buffer = (buffer << 5) | UInt32(value)
            result.leftoverBitCount += 5
            if result.leftoverBitCount >= 8 {
                result.leftoverBitCount -= 8
                result.bytes.append(UInt8(truncatingIfNeeded: buffer >> UInt32(result.leftoverBitCount)))
                buffer &= (1 << UInt32(result.leftoverBitCount)) - 1
            }
            result.symbolCount += 1
            result.lastSymbolOffset = offset
            result.lastSymbol = character
        }
        result.leftoverValue = buffer
        return result
    }

    /// Space, tab, CR, LF (including the single `Character` "\r\n") and `-`.
    static func isIgnorable(_ character: Character) -> Bool {
        character.unicodeScalars.allSatisfy { scalar in
            scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r" || scalar == "-"
        }
    }

    /// The value of a symbol or alias, or nil.
    static func value(of character: Character) -> UInt8? {
        guard let ascii = character.asciiValue else { return nil }
        let value = decodeTable[Int(ascii)]
        return value < 0 ? nil : UInt8(value)
    }

    private static let alphabetASCII: [UInt8] = alphabet.map { $0.asciiValue! }

    /// ASCII code → symbol value, or -1.
    private static let decodeTable: [Int8] = {
        var table = [Int8](repeating: -1, count: 128)
        let aliases: [(UInt8, Int8)] = [(UInt8(ascii: "O"), 0), (UInt8(ascii: "I"), 1), (UInt8(ascii: "L"), 1)]
        let symbols = alphabetASCII.enumerated().map { (UInt8($0.element), Int8($0.offset)) }
        for (ascii, value) in symbols + aliases {
            table[Int(ascii)] = value
            if ascii >= UInt8(ascii: "A") && ascii <= UInt8(ascii: "Z") {
                table[Int(ascii | 0x20)] = value  // the lower-case letter
            }
        }
        return table
    }()
}
