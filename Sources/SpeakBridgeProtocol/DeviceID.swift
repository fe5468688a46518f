// Device ID (Pairing/PROTOCOL.md, "Identity"): Crockford base32 of the first 10 bytes of SHA256(public key),
// 16 symbols, shown as XXXX-XXXX-XXXX-XXXX. 80 bits is a multiple of 5, so there are no padding bits.
// This module has no SHA-256 of its own: the caller (SpeakBridgeCrypto's users) passes the digest in.

/// A short, human-checkable fingerprint of a device's static public key.
public struct DeviceID: Hashable, Sendable, CustomStringConvertible, Codable {
    /// Bytes of the digest that the ID keeps.
    public static let byteCount = 10
    /// Symbols in the compact form.
    public static let symbolCount = 16

    /// The first `byteCount` bytes of SHA256(public key).
    public let bytes: [UInt8]

    public static func == (a: DeviceID, b: DeviceID) -> Bool { a.bytes == b.bytes }

    /// Two words, not a byte buffer: the synthesized conformance fed the hasher one byte at a time, and
    /// `combine(bytes:)` still goes through the hasher's tail buffer; the delivery path hashes a device several
    /// times per chunk. The ID is always `byteCount` (10) bytes (both initializers make it so); anything else is
    /// hashed as bytes.
    public func hash(into hasher: inout Hasher) {
        guard bytes.count == Self.byteCount else {
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
            return
        }
        bytes.withUnsafeBytes { raw in
            hasher.combine(raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
            hasher.combine(raw.loadUnaligned(fromByteOffset: 8, as: UInt16.self))
        }
    }

    /// The ID of the key whose SHA-256 digest is `publicKeyDigest` (32 bytes; the first 10 are used).
    /// A digest of any other length is a programming error and traps.
    public init(publicKeyDigest: [UInt8]) {
        precondition(publicKeyDigest.count == 32, "DeviceID needs the 32-byte SHA-256 digest of the public key")
        bytes = Array(publicKeyDigest.prefix(Self.byteCount))
    }

    /// Reads an ID as a user may type it: any case, with or without `-` (or spaces), `O` for 0, `I`/`L` for 1.
    public init(parsing text: String) throws(DeviceIDError) {
        let bits: CrockfordBase32.Bits
        do {
            bits = try CrockfordBase32.decodeBits(text)
        } catch {
            throw .invalidCharacter(error.character, position: error.offset + 1)
        }
        guard bits.symbolCount == Self.symbolCount else {
            throw .invalidLength(symbolCount: bits.symbolCount)
        }
        // 16 symbols are exactly 10 bytes, with nothing left over.
        bytes = bits.bytes
    }

    /// `XXXX-XXXX-XXXX-XXXX`.
    public var description: String {
        var grouped = ""
        for (index, symbol) in compact.enumerated() {
            if index > 0 && index % 4 == 0 { grouped.append("-") }
            grouped.append(symbol)
        }
        return grouped
    }

    /// The 16 symbols without dashes.
    public var compact: String {
        CrockfordBase32.encode(bytes)
    }

    /// Encoded as the dashed string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    /// Decoded from a string in any form that `init(parsing:)` accepts.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            self = try DeviceID(parsing: text)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }
}

/// Why a string is not a device ID.
public enum DeviceIDError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not 16 symbols (dashes and spaces not counted).
    case invalidLength(symbolCount: Int)
    /// A character that cannot appear in a device ID; `position` counts characters from 1.
    case invalidCharacter(Character, position: Int)

    public var description: String {
        switch self {
        case .invalidLength(let count):
            "a device ID has 16 characters (like 7RQ4-K2M9-XW3D-8HNP), not \(count)"
        case .invalidCharacter(let character, let position):
            "a device ID cannot contain \(quoted(character)) (character \(position))"
        }
    }
}

/// A character for a message: printable ASCII in quotes, anything else as U+XXXX.
func quoted(_ character: Character) -> String {
    if let ascii = character.asciiValue, ascii >= 0x21, ascii < 0x7F {
        return "'\(character)'"
    }
    return character.unicodeScalars.map { scalar in
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }.joined(separator: " ")
}
