// Pairing code (Pairing/PROTOCOL.md, "Pairing code"): the text a desktop shows (as a terminal QR and as text)
// and a capture client reads once, by camera or copy/paste.
//
//   text    = "SB1:" || CrockfordBase32(payload || CRC32(payload) as 4 bytes big-endian)
//   payload = version 0x01 | flags 0x00 | public key (32) | secret (32) | expiry (4) | port (2) | count n (0…8) |
//             n × (0x04 || 4 bytes  or  0x06 || 16 bytes)
//
// Parse flow (the order decides which error a damaged code reports, see PROTOCOL.md):
//   1. prefix: `SB<version>:`, any case, after optional leading whitespace; version 1 only;
//   2. symbols: Crockford base32, tolerant of case, O/I/L and of whitespace and `-`;
//   3. too few bytes for the smallest code → truncated;
//   4. checksum over everything but the last 4 bytes; on a match the structure is parsed with specific errors;
//      on a mismatch the code was mistyped or mangled, and the parser only tells an extra tail (a shorter code
//      inside checks out), a missing tail (the length is impossible and the header asks for more) and any other
//      damage (checksum mismatch) apart;
//   5. structure: version, flags, count, families, nothing after the last address.
// Nothing here reads a clock, a socket or a file: the expiry check takes `now`.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import SpeakBridgeCrypto

// MARK: - Address

/// A candidate address of the desktop, as carried in a pairing code. No zone (scope) is carried.
public enum PairingAddress: Hashable, Sendable, CustomStringConvertible {
    /// 4 bytes, network order.
    case ipv4([UInt8])
    /// 16 bytes, network order.
    case ipv6([UInt8])

    /// Parses "192.168.1.5", "::1", "fe80::1" with `inet_pton`; nil for anything else (including a zone "%eth0").
    public init?(_ text: String) {
        // A NUL would end the C string early and let "1.2.3.4\0junk" through.
        guard !text.utf8.contains(0) else { return nil }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self = .ipv4(withUnsafeBytes(of: v4) { Array($0) })  // in_addr holds the address in network order
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            self = .ipv6(withUnsafeBytes(of: v6) { Array($0) })
            return
        }
        return nil
    }

    /// The `inet_ntop` form ("192.168.1.5", "fd00::1"); "invalid address" if the bytes have the wrong length.
    public var description: String {
        guard isWellFormed else { return "invalid address" }
        var buffer = [CChar](repeating: 0, count: 64)  // INET6_ADDRSTRLEN is 46
        let family = isIPv4 ? AF_INET : AF_INET6
        let result = bytes.withUnsafeBytes { source in
            inet_ntop(family, source.baseAddress, &buffer, socklen_t(buffer.count))
        }
        guard result != nil else { return "invalid address" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The address bytes, network order.
    public var bytes: [UInt8] {
        switch self {
        case .ipv4(let bytes), .ipv6(let bytes): bytes
        }
    }

    /// The family byte in a pairing code: 0x04 or 0x06.
    var familyByte: UInt8 {
        isIPv4 ? PairingCode.familyIPv4 : PairingCode.familyIPv6
    }

    /// 4 bytes for IPv4, 16 for IPv6.
    var isWellFormed: Bool {
        switch self {
        case .ipv4(let bytes): bytes.count == 4
        case .ipv6(let bytes): bytes.count == 16
        }
    }

    private var isIPv4: Bool {
        if case .ipv4 = self { true } else { false }
    }
}

// MARK: - Code

/// The contents of a pairing code, and its text form.
public struct PairingCode: Equatable, Sendable {
    /// Text prefix; its version and the payload's version byte agree.
    public static let prefix = "SB1:"
    /// The version in the prefix and in the payload's first byte.
    public static let version: UInt8 = 1
    /// At most this many addresses.
    public static let maxAddresses = 8

    /// The desktop's static X25519 public key: 32 bytes.
    public var publicKey: [UInt8]
    /// The one-time pairing secret (the psk while pairing): 32 bytes, kept in self-wiping storage.
    private var secretStorage: SecureBytes
    /// A plain copy of the secret (the caller should wipe it); setting it replaces the stored secret.
    public var secret: [UInt8] {
        get { secretStorage.copyBytes() }
        set { secretStorage = SecureBytes(newValue) }
    }
    /// The secret as a key, the form the handshake takes (nil only if `secret` was set to a wrong length).
    public var secretKey: SymmetricKey? { try? SymmetricKey(secureBytes: secretStorage) }
    /// Unix seconds; the code is valid while `now < expiry` (by the desktop's clock).
    public var expiry: UInt32
    /// The desktop's TCP port.
    public var port: UInt16
    /// Candidate addresses of the desktop, most likely first; at most `maxAddresses`.
    public var addresses: [PairingAddress]

    /// Checks the lengths of key, secret and addresses and the number of addresses.
    public init(
        publicKey: [UInt8], secret: [UInt8], expiry: UInt32, port: UInt16, addresses: [PairingAddress]
    ) throws(PairingCodeError) {
        try self.init(publicKey: publicKey, secretStorage: SecureBytes(secret), expiry: expiry, port: port,
                      addresses: addresses)
    }

    /// A code for a secret that never leaves wiped storage (the desktop's own codes).
    public init(
        publicKey: [UInt8], secretKey: SymmetricKey, expiry: UInt32, port: UInt16, addresses: [PairingAddress]
    ) throws(PairingCodeError) {
        try self.init(publicKey: publicKey, secretStorage: secretKey.secureBytes, expiry: expiry, port: port,
                      addresses: addresses)
    }

    private init(
        publicKey: [UInt8], secretStorage: SecureBytes, expiry: UInt32, port: UInt16, addresses: [PairingAddress]
    ) throws(PairingCodeError) {
        self.publicKey = publicKey
        self.secretStorage = secretStorage
        self.expiry = expiry
        self.port = port
        self.addresses = addresses
        try validate()
    }

    /// Throws if a field was set to something `encoded()` cannot write (the properties are mutable).
    public func validate() throws(PairingCodeError) {
        guard publicKey.count == Self.keyLength else { throw .invalidLength(field: "publicKey") }
        guard secretStorage.count == Self.secretLength else { throw .invalidLength(field: "secret") }
        guard addresses.count <= Self.maxAddresses else { throw .tooManyAddresses(addresses.count) }
        guard addresses.allSatisfy(\.isWellFormed) else { throw .invalidLength(field: "address") }
    }

    /// The text form: `SB1:` and upper-case Crockford base32, only QR alphanumeric characters.
    /// Traps if the properties were changed to something `validate()` rejects.
    public func encoded() -> String {
        do {
            try validate()
        } catch {
            preconditionFailure("PairingCode.encoded() on an invalid code: \(error)")
        }
        var bytes = payload()
        defer { bytes.wipe() }
        let checksum = CRC32.checksum(bytes)
        bytes += [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: checksum >> $0) }
        return Self.prefix + CrockfordBase32.encode(bytes)
    }

    /// Reads a code as scanned, pasted or typed. See the file comment for the order of checks.
    public static func parse(_ text: String) throws(PairingCodeError) -> PairingCode {
        let (body, bodyOffset) = try splitPrefix(text)

        let bits: CrockfordBase32.Bits
        do {
            bits = try CrockfordBase32.decodeBits(body, firstOffset: bodyOffset)
        } catch {
            throw .invalidCharacter(error.character, position: error.offset + 1)
        }
        let bytes = bits.bytes
        guard bytes.count >= minimumLength else { throw .truncated }

        if checksumMatches(bytes[...]) {
            // A whole symbol beyond the last byte: something was appended.
            guard bits.leftoverBitCount < 5 else { throw .trailingBytes }
            // Only the padding bits of the last symbol differ from what an encoder writes: a mistyped symbol.
            if bits.leftoverValue != 0, let symbol = bits.lastSymbol, let offset = bits.lastSymbolOffset {
                throw .invalidCharacter(symbol, position: offset + 1)
            }
            return try parsePayload(bytes.dropLast(checksumLength))
        }
        // Damaged. A code followed by extra symbols still has a valid checksum at its own end: look for one,
        // with a running CRC over bytes[..<end - 4] for every shorter end.
        var crc = CRC32.checksum(bytes[..<(minimumLength - checksumLength)])
        for end in minimumLength..<bytes.count {
            if crc == bigEndian(bytes[(end - checksumLength)..<end]) { throw .trailingBytes }
            crc = CRC32.update(crc, with: CollectionOfOne(bytes[end - checksumLength]))
        }
        // A length no code can have, shorter than what the header asks for: the end is missing. (A substituted
        // symbol keeps a possible length, so it always lands on checksumMismatch below.)
        if !possibleLengths.contains(bytes.count), let wanted = claimedLength(bytes), wanted > bytes.count {
            throw .truncated
        }
        throw .checksumMismatch
    }

    /// Throws `expired` unless `now < expiry`.
    public func checkNotExpired(now: UInt32) throws(PairingCodeError) {
        try checkNotExpired(now: now, allowedClockSkew: 0)
    }

    /// Throws `expired` unless `now < expiry + allowedClockSkew`: for a client, whose clock may differ from the
    /// desktop's (the desktop enforces the expiry by its own clock in any case).
    public func checkNotExpired(now: UInt32, allowedClockSkew: UInt32) throws(PairingCodeError) {
        if UInt64(now) >= UInt64(expiry) + UInt64(allowedClockSkew) {
            throw .expired(secondsAgo: Int(now) - Int(expiry))
        }
    }

    // MARK: Layout

    static let keyLength = 32
    static let secretLength = 32
    /// version, flags, key, secret, expiry, port, count.
    static let headerLength = 1 + 1 + keyLength + secretLength + 4 + 2 + 1
    static let checksumLength = 4
    static let familyIPv4: UInt8 = 0x04
    static let familyIPv6: UInt8 = 0x06
    static let entryLengthIPv4 = 1 + 4
    static let entryLengthIPv6 = 1 + 16
    /// Flags this version understands: none.
    static let knownFlags: UInt8 = 0x00
    /// Bytes (payload and checksum) of a code without addresses.
    static let minimumLength = headerLength + checksumLength

    /// Every byte length (payload and checksum) that a valid code can have.
    static let possibleLengths: Set<Int> = {
        var lengths = Set<Int>()
        for v4 in 0...maxAddresses {
            for v6 in 0...(maxAddresses - v4) {
                lengths.insert(minimumLength + v4 * entryLengthIPv4 + v6 * entryLengthIPv6)
            }
        }
        return lengths
    }()

    private func payload() -> [UInt8] {
        var bytes: [UInt8] = [Self.version, Self.knownFlags]
        // Room for the checksum too: no reallocation leaves an unwiped copy of the secret behind.
        bytes.reserveCapacity(Self.headerLength + addresses.count * Self.entryLengthIPv6 + 4)
        bytes += publicKey
        secretStorage.withUnsafeBytes { bytes += $0 }
        bytes += [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: expiry >> $0) }
        bytes += [8, 0].map { UInt8(truncatingIfNeeded: port >> $0) }
        bytes.append(UInt8(addresses.count))
        for address in addresses {
            bytes.append(address.familyByte)
            bytes += address.bytes
        }
        return bytes
    }

    /// Finds `SB<digits>:` after leading whitespace; returns the rest and its `Character` offset in `text`.
    private static func splitPrefix(_ text: String) throws(PairingCodeError) -> (Substring, Int) {
        var rest = text[...]
        var offset = 0
        while let first = rest.first, first.unicodeScalars.allSatisfy({ " \t\r\n".unicodeScalars.contains($0) }) {
            rest = rest.dropFirst()
            offset += 1
        }
        let letters = rest.prefix(2).map { $0.asciiValue.map { $0 & ~0x20 } }  // ASCII upper case
        guard letters == [UInt8(ascii: "S"), UInt8(ascii: "B")] else { throw .missingPrefix }
        rest = rest.dropFirst(2)
        let digits = rest.prefix { $0.isASCII && $0.isNumber }
        rest = rest.dropFirst(digits.count)
        guard !digits.isEmpty, rest.first == ":" else { throw .missingPrefix }
        rest = rest.dropFirst()
        guard digits == "\(version)" else {
            // "SB2:" is a code of another version; "SB01:" or a run of digits is no prefix at all.
            // 1 to 3 digits without a leading zero ("0" itself counts): the version, 0 to 999, reported as written.
            guard digits.count <= 3, digits.first != "0" || digits.count == 1, let number = Int(digits) else {
                throw .missingPrefix
            }
            throw .unsupportedVersion(number)
        }
        return (rest, offset + 2 + digits.count + 1)
    }

    /// Whether the last 4 bytes are the big-endian CRC-32 of the bytes before them.
    private static func checksumMatches(_ bytes: ArraySlice<UInt8>) -> Bool {
        guard bytes.count >= checksumLength else { return false }
        return CRC32.checksum(bytes.dropLast(checksumLength)) == bigEndian(bytes.suffix(checksumLength))
    }

    private static func bigEndian(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        bytes.reduce(0) { ($0 << 8) | UInt32($1) }
    }

    /// The length the (unchecked) count and family bytes ask for, or nil if they make no sense. Only a hint
    /// for telling "the end is missing" from other damage.
    private static func claimedLength(_ bytes: [UInt8]) -> Int? {
        let count = Int(bytes[headerLength - 1])
        guard count <= maxAddresses else { return nil }
        var length = headerLength
        for _ in 0..<count {
            guard length < bytes.count else { return Int.max }  // the families themselves are cut off
            switch bytes[length] {
            case familyIPv4: length += entryLengthIPv4
            case familyIPv6: length += entryLengthIPv6
            default: return nil
            }
        }
        return length + checksumLength
    }

    /// Parses a payload whose checksum matched.
    private static func parsePayload(_ payload: ArraySlice<UInt8>) throws(PairingCodeError) -> PairingCode {
        var reader = Reader(remaining: payload)
        let version = try reader.byte()
        guard version == Self.version else { throw .unsupportedVersion(Int(version)) }
        let flags = try reader.byte()
        guard flags & ~knownFlags == 0 else { throw .unknownFlags(flags) }
        let publicKey = try reader.take(keyLength)
        var secret = try reader.take(secretLength)
        defer { secret.wipe() }
        let expiry = bigEndian(try reader.take(4)[...])
        let port = try reader.take(2).reduce(UInt16(0)) { ($0 << 8) | UInt16($1) }
        let count = Int(try reader.byte())
        guard count <= maxAddresses else { throw .tooManyAddresses(count) }
        var addresses: [PairingAddress] = []
        for _ in 0..<count {
            let family = try reader.byte()
            switch family {
            case familyIPv4: addresses.append(.ipv4(try reader.take(4)))
            case familyIPv6: addresses.append(.ipv6(try reader.take(16)))
            default: throw .invalidAddressFamily(family)
            }
        }
        guard reader.remaining.isEmpty else { throw .trailingBytes }
        return try PairingCode(publicKey: publicKey, secret: secret, expiry: expiry, port: port, addresses: addresses)
    }

    /// Reads fields off the front of a payload; running out is `truncated`.
    private struct Reader {
        var remaining: ArraySlice<UInt8>

        mutating func byte() throws(PairingCodeError) -> UInt8 {
            guard let byte = remaining.popFirst() else { throw .truncated }
            return byte
        }

        mutating func take(_ count: Int) throws(PairingCodeError) -> [UInt8] {
            guard remaining.count >= count else { throw .truncated }
            defer { remaining = remaining.dropFirst(count) }
            return Array(remaining.prefix(count))
        }
    }
}

extension PairingCode {
    /// Field by field; the secrets are compared in constant time.
    public static func == (lhs: PairingCode, rhs: PairingCode) -> Bool {
        lhs.publicKey == rhs.publicKey && lhs.secretStorage.constantTimeEquals(rhs.secretStorage)
            && lhs.expiry == rhs.expiry && lhs.port == rhs.port && lhs.addresses == rhs.addresses
    }
}

/// Shows everything but the secret, so that logging a code does not leak it.
extension PairingCode: CustomStringConvertible, CustomReflectable {
    public var description: String {
        let key = publicKey.prefix(8).map(hex).joined()
        return "PairingCode(publicKey: \(key)…, secret: <redacted>, expiry: \(expiry), port: \(port), "
            + "addresses: [\(addresses.map(\.description).joined(separator: ", "))])"
    }

    public var customMirror: Mirror {
        Mirror(self, children: [
            "publicKey": publicKey, "secret": "<redacted>", "expiry": expiry, "port": port, "addresses": addresses,
        ], displayStyle: .struct)
    }
}

// MARK: - Errors

/// Why a pairing code cannot be used. `description` says what happened, `hint` what to do.
public enum PairingCodeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The text does not start with `SB<version>:`.
    case missingPrefix
    /// The prefix (`SB0:` … `SB999:`) or the payload's version byte (0 … 255) names another protocol version.
    case unsupportedVersion(Int)
    /// A character that is not base32, an alias or ignorable; `position` counts characters of the text from 1.
    case invalidCharacter(Character, position: Int)
    /// The checksum does not match: a symbol was mistyped, or one is missing or extra in the middle.
    case checksumMismatch
    /// The code ends early.
    case truncated
    /// There is more after the end of the code.
    case trailingBytes
    /// Flag bits this version does not know.
    case unknownFlags(UInt8)
    /// Building a code: `publicKey` or `secret` is not 32 bytes, or an `address` has the wrong length.
    case invalidLength(field: String)
    /// More than `PairingCode.maxAddresses` addresses.
    case tooManyAddresses(Int)
    /// An address family byte other than 0x04 and 0x06.
    case invalidAddressFamily(UInt8)
    /// The code expired this many seconds ago.
    case expired(secondsAgo: Int)

    public var description: String {
        switch self {
        case .missingPrefix:
            "this is not a SpeakBridge pairing code (it starts with \(PairingCode.prefix))"
        case .unsupportedVersion(let version):
            "this pairing code is for SpeakBridge protocol version \(version), this device speaks version "
                + "\(PairingCode.version)"
        case .invalidCharacter(let character, let position):
            "the pairing code has an invalid character \(quoted(character)) at position \(position)"
        case .checksumMismatch:
            "the pairing code is damaged (its checksum does not match)"
        case .truncated:
            "the pairing code is incomplete (its end is missing)"
        case .trailingBytes:
            "the pairing code has extra characters at the end"
        case .unknownFlags(let flags):
            "the pairing code asks for features this version does not know (flags 0x\(hex(flags)))"
        case .invalidLength(let field):
            "the pairing code's \(field) has the wrong length"
        case .tooManyAddresses(let count):
            "the pairing code lists \(count) addresses, at most \(PairingCode.maxAddresses) are allowed"
        case .invalidAddressFamily(let family):
            "the pairing code has an address of unknown type 0x\(hex(family))"
        case .expired(let seconds) where seconds < 1:
            "the pairing code has expired"
        case .expired(let seconds):
            "the pairing code expired \(Self.duration(seconds)) ago"
        }
    }

    /// What the user can do about it; nil for programming errors.
    public var hint: String? {
        switch self {
        case .missingPrefix:
            "copy the whole code shown by `speakbridge pair` on the desktop, including \(PairingCode.prefix)"
        case .unsupportedVersion:
            "update SpeakBridge so that both devices run the same protocol version"
        case .invalidCharacter, .checksumMismatch:
            "check the code for a mistyped character, or copy it again"
        case .truncated:
            "copy the whole code again; it may have been cut off at a line break"
        case .trailingBytes:
            "remove whatever follows the code, or copy it again"
        case .unknownFlags, .invalidAddressFamily:
            "update SpeakBridge on this device, or run `speakbridge pair` on the desktop for a new code"
        case .tooManyAddresses:
            "run `speakbridge pair` on the desktop for a new code"
        case .expired:
            "run `speakbridge pair` on the desktop for a new code; if it was fresh, check both devices' clocks"
        case .invalidLength:
            nil
        }
    }

    private static func duration(_ seconds: Int) -> String {
        switch seconds {
        case ..<2: "1 second"
        case ..<120: "\(seconds) seconds"
        case ..<7200: "\(seconds / 60) minutes"
        case ..<172_800: "\(seconds / 3600) hours"
        default: "\(seconds / 86400) days"
        }
    }
}

/// Two upper-case hex digits.
private func hex(_ byte: UInt8) -> String {
    let digits = String(byte, radix: 16, uppercase: true)
    return digits.count == 1 ? "0" + digits : digits
}
