import Foundation  // JSONEncoder/JSONDecoder for DeviceID's Codable form
import SpeakBridgeTestSupport
import Testing

@testable import SpeakBridgeProtocol

// Fixtures: fixed key, secret and addresses, so that failures print the same codes every run.
enum Fixture {
    static let key: [UInt8] = Array(0x00...0x1F)
    static let secret: [UInt8] = Array(0xE0...0xFF)
    static let expiry: UInt32 = 1_700_000_000
    static let port: UInt16 = 47_800
    static let v4a = PairingAddress.ipv4([192, 168, 1, 5])
    static let v4b = PairingAddress.ipv4([10, 0, 0, 7])
    static let v6 = PairingAddress.ipv6([0xFD, 0x00] + [UInt8](repeating: 0, count: 13) + [0x01])  // fd00::1

    static func code(_ addresses: [PairingAddress]) -> PairingCode {
        try! PairingCode(publicKey: key, secret: secret, expiry: expiry, port: port, addresses: addresses)
    }

    /// Codes with 0, 1, 2 and 8 addresses.
    static let samples: [PairingCode] = [
        code([]), code([v4a]), code([v6]), code([v4a, v6]),
        code([
            v4a, v6, v4b, .ipv6(Array(0...15)), .ipv4([127, 0, 0, 1]), v6, v4a,
            .ipv6(Array(repeating: 0xFF, count: 16)),
        ]),
    ]

    /// A payload built by hand, field by field, for codes the encoder refuses to write.
    static func payload(
        version: UInt8 = 1, flags: UInt8 = 0, count: UInt8? = nil, entries: [[UInt8]] = [[0x04, 192, 168, 1, 5]]
    ) -> [UInt8] {
        var bytes = [version, flags] + key + secret
        bytes += [0x65, 0x53, 0xF1, 0x00]  // 1_700_000_000
        bytes += [0xBA, 0xB8]  // 47_800
        bytes.append(count ?? UInt8(entries.count))
        for entry in entries { bytes += entry }
        return bytes
    }

    /// `prefix` and the base32 of `payload` and its correct big-endian CRC-32.
    static func text(payload: [UInt8], prefix: String = "SB1:") -> String {
        let crc = CRC32.checksum(payload)
        return prefix
            + CrockfordBase32.encode(
                payload + [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)])
    }
}

@Suite("Pairing code")
struct PairingCodeTests {
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")

    // MARK: Good codes

    /// Computed independently with Python (zlib.crc32, base64.b32encode with the alphabet swapped) from the
    /// fixture: key 00…1F, secret E0…FF, expiry 1700000000, port 47800, 192.168.1.5 and fd00::1.
    @Test("known answer: the fixture with 192.168.1.5 and fd00::1")
    func knownAnswer() throws {
        let expected =
            "SB1:040000820C20A1G7104GM2RC1M70Y40H289H858P2WC1J6GV3GEHW7Z0W7HE7S75WVKYHTFAXFPEVVQFY3RZ5WZMYQV"
            + "FFY7SZBXZSZFYZXJN7W80QAW04160N00GA1QX000000000000000000000001FYBCJD8"
        let code = Fixture.code([Fixture.v4a, Fixture.v6])
        #expect(code.encoded() == expected)
        #expect(try PairingCode.parse(expected) == code)
    }

    @Test("round trip with 0, 1 (IPv4), 1 (IPv6), 2 and 8 addresses", arguments: Fixture.samples)
    func roundTrip(code: PairingCode) throws {
        let text = code.encoded()
        let parsed = try PairingCode.parse(text)
        #expect(parsed == code)
        #expect(parsed.publicKey == Fixture.key)
        #expect(parsed.secret == Fixture.secret)
        #expect(parsed.expiry == Fixture.expiry)
        #expect(parsed.port == Fixture.port)
        #expect(parsed.addresses == code.addresses)
    }

    @Test("round trip of random codes; only QR alphanumeric characters (0-9 A-Z space $%*+-./:)")
    func randomRoundTripAndCharacterSet() throws {
        let qrAlphanumeric = Set("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ $%*+-./:")
        var random = SplitMix64(seed: 0x0A1F)
        for _ in 0..<300 {
            let addresses: [PairingAddress] = (0..<Int.random(in: 0...8, using: &random)).map { _ in
                Bool.random(using: &random) ? .ipv4(random.bytes(4)) : .ipv6(random.bytes(16))
            }
            let code = try PairingCode(
                publicKey: random.bytes(32), secret: random.bytes(32),
                expiry: UInt32.random(in: 0 ... .max, using: &random),
                port: UInt16.random(in: 0 ... .max, using: &random), addresses: addresses)
            let text = code.encoded()
            #expect(text.allSatisfy(qrAlphanumeric.contains), "\(text)")
            #expect(text.hasPrefix(PairingCode.prefix))
            #expect(try PairingCode.parse(text) == code)
        }
    }

    // A typical code, two IPv4 addresses (192.168.1.5, 10.0.0.7), 144 characters (checked with Python too):
    // SB1:040000820C20A1G7104GM2RC1M70Y40H289H858P2WC1J6GV3GEHW7Z0W7HE7S75WVKYHTFAXFPEVVQFY3RZ5WZMYQVFFY7SZBXZSZ
    //     FYZXJN7W80QAW04160N00GA10A0000F7WAQVP0
    // IPv4 + IPv6 (the known answer above) is 163 characters; no addresses 128; eight IPv6 addresses 345.
    @Test("length: 2 IPv4 addresses → 144 characters (< 160); IPv4 + IPv6 → 163; 4 + ceil(8 × bytes / 5) in general")
    func length() {
        let typical = Fixture.code([Fixture.v4a, Fixture.v4b]).encoded()
        print("typical pairing code (\(typical.count) characters): \(typical)")
        let expected =
            "SB1:040000820C20A1G7104GM2RC1M70Y40H289H858P2WC1J6GV3GEHW7Z0W7HE7S75WVKYHTFAXFPEVVQFY3RZ5WZMYQVFF"
            + "Y7SZBXZSZFYZXJN7W80QAW04160N00GA10A0000F7WAQVP0"
        #expect(typical == expected)
        #expect(Fixture.code([]).encoded().count == 128)
        #expect(typical.count == 144)
        #expect(typical.count < 160)
        #expect(Fixture.code([Fixture.v4a, Fixture.v6]).encoded().count == 163)
        for v4 in 0...8 {
            for v6 in 0...(8 - v4) {
                let addresses = Array(repeating: Fixture.v4a, count: v4) + Array(repeating: Fixture.v6, count: v6)
                let bytes = 73 + 5 * v4 + 17 * v6 + 4
                #expect(Fixture.code(addresses).encoded().count == 4 + (bytes * 8 + 4) / 5)
            }
        }
    }

    @Test("tolerant parse: lower case (prefix too), O/I/L, dashes, line breaks, surrounding whitespace")
    func tolerantParse() throws {
        let code = Fixture.code([Fixture.v4a, Fixture.v6])
        let text = code.encoded()
        let body = String(text.dropFirst(4))
        var grouped = ""
        for (index, character) in body.enumerated() {
            if index > 0 && index % 4 == 0 { grouped += index % 40 == 0 ? "\r\n" : "-" }
            grouped.append(character)
        }
        for variant in [
            text.lowercased(),
            "SB1:" + body.replacingOccurrences(of: "0", with: "O").replacingOccurrences(of: "1", with: "l"),
            "SB1:" + grouped,
            "  \n\tSB1:" + body + " \n",
            "sb1:" + body.replacingOccurrences(of: "1", with: "i"),
        ] {
            #expect(try PairingCode.parse(variant) == code, "\(variant.debugDescription)")
        }
    }

    // MARK: Bad codes, each with its own error

    @Test("missing prefix")
    func missingPrefix() {
        let body = String(Fixture.code([Fixture.v4a]).encoded().dropFirst(4))
        for text in [
            "", "   ", body, "1:" + body, "SB:" + body, "SB1" + body, "XB1:" + body, "code: SB1:" + body,
            "SBX:" + body, "SB01:" + body, "S B1:" + body, "ŞB1:" + body, "SB00:" + body, "SB1000:" + body,
            "SB001:" + body,
        ] {
            #expect(throws: PairingCodeError.missingPrefix, "\(text.prefix(12))") { try PairingCode.parse(text) }
        }
    }

    @Test("wrong version: SB2: prefix, and payload version 2 under SB1:")
    func wrongVersion() {
        let body = String(Fixture.code([Fixture.v4a]).encoded().dropFirst(4))
        #expect(throws: PairingCodeError.unsupportedVersion(2)) { try PairingCode.parse("SB2:" + body) }
        #expect(throws: PairingCodeError.unsupportedVersion(0)) { try PairingCode.parse("sb0:" + body) }
        #expect(throws: PairingCodeError.unsupportedVersion(17)) { try PairingCode.parse("SB17:" + body) }
        // Up to three digits are a version number, reported as written (it used to be clamped to 255).
        #expect(throws: PairingCodeError.unsupportedVersion(999)) { try PairingCode.parse("SB999:" + body) }
        #expect(throws: PairingCodeError.unsupportedVersion(256)) { try PairingCode.parse("SB256:" + body) }
        let v2 = Fixture.text(payload: Fixture.payload(version: 2))
        #expect(throws: PairingCodeError.unsupportedVersion(2)) { try PairingCode.parse(v2) }
        #expect(throws: PairingCodeError.unsupportedVersion(0)) {
            try PairingCode.parse(Fixture.text(payload: Fixture.payload(version: 0)))
        }
    }

    @Test("every single-symbol substitution is caught", arguments: Fixture.samples)
    func everySubstitution(code: PairingCode) {
        let text = Array(code.encoded())
        for position in text.indices {
            for replacement in Self.alphabet where replacement != text[position] {
                var damaged = text
                damaged[position] = replacement
                let error = #expect(throws: PairingCodeError.self) { try PairingCode.parse(String(damaged)) }
                switch position {
                case 0, 1, 3:
                    #expect(error == .missingPrefix)
                case 2:
                    // "SB<digit>:" is a code of another version, "SB<letter>:" no code at all.
                    let expected = replacement.wholeNumberValue.map { PairingCodeError.unsupportedVersion($0) }
                    #expect(error == expected ?? .missingPrefix)
                default:
                    // A changed data bit breaks the checksum; a changed padding bit in the last symbol is reported
                    // as that symbol.
                    let accepted: [PairingCodeError] = [
                        .checksumMismatch, .invalidCharacter(replacement, position: position + 1),
                    ]
                    #expect(
                        accepted.contains(error!), "position \(position), \(replacement): \(String(describing: error))")
                    if position < text.count - 1 { #expect(error == .checksumMismatch) }
                }
            }
        }
    }

    @Test("a damaged last symbol that only changes padding bits is an invalid character there")
    func paddingOnlySubstitution() {
        // 87 bytes = 696 bits in 140 symbols: the last symbol carries 1 data bit and 4 padding bits.
        let text = Fixture.code([Fixture.v4a, Fixture.v4b]).encoded()
        let last = text.last!
        let value = Self.alphabet.firstIndex(of: last)!
        let replacement = Self.alphabet[value ^ 0b0001]
        #expect(throws: PairingCodeError.invalidCharacter(replacement, position: text.count)) {
            try PairingCode.parse(String(text.dropLast()) + String(replacement))
        }
    }

    @Test("characters outside the alphabet, at their position counted from 1 in the text as given")
    func invalidCharacter() {
        let text = Fixture.code([Fixture.v4a]).encoded()
        #expect(throws: PairingCodeError.invalidCharacter("U", position: 11)) {
            try PairingCode.parse(String(text.prefix(10)) + "U" + text.dropFirst(11))
        }
        #expect(throws: PairingCodeError.invalidCharacter("é", position: 8)) {
            try PairingCode.parse("  " + String(text.prefix(5)) + "é" + text.dropFirst(6))
        }
        #expect(throws: PairingCodeError.invalidCharacter(".", position: text.count + 1)) {
            try PairingCode.parse(text + ".")
        }
    }

    @Test(
        "a deleted symbol: truncated when it is near the end, otherwise caught all the same", arguments: Fixture.samples
    )
    func deletedSymbol(code: PairingCode) {
        let text = Array(code.encoded())
        // Deleting a symbol of the checksum leaves the payload, whose count and families ask for more, intact.
        let payloadLength = 73 + code.addresses.reduce(0) { $0 + 1 + $1.bytes.count }
        let headerSymbols = 4 + (payloadLength * 8 + 4) / 5
        for position in 4..<text.count {
            var damaged = text
            damaged.remove(at: position)
            let error = #expect(throws: PairingCodeError.self) { try PairingCode.parse(String(damaged)) }
            #expect(error == .truncated || error == .checksumMismatch, "position \(position)")
            if position >= headerSymbols { #expect(error == .truncated, "position \(position)") }
        }
    }

    @Test("appended symbols are trailing bytes", arguments: Fixture.samples)
    func appendedSymbols(code: PairingCode) {
        let text = code.encoded()
        for symbol in Self.alphabet {
            #expect(throws: PairingCodeError.trailingBytes) { try PairingCode.parse(text + String(symbol)) }
        }
        for tail in ["00", "ZZZ", "7RQ4", "SB1", "0000000000000"] {
            #expect(throws: PairingCodeError.trailingBytes, "\(tail)") { try PairingCode.parse(text + tail) }
        }
    }

    @Test("truncated codes", arguments: Fixture.samples)
    func truncated(code: PairingCode) {
        let text = code.encoded()
        #expect(throws: PairingCodeError.truncated) { try PairingCode.parse(String(text.dropLast())) }
        #expect(throws: PairingCodeError.truncated) { try PairingCode.parse(String(text.prefix(text.count / 2))) }
        #expect(throws: PairingCodeError.truncated) { try PairingCode.parse("SB1:") }
        for cut in 1..<(text.count - 4) {
            let error = #expect(throws: PairingCodeError.self) { try PairingCode.parse(String(text.dropLast(cut))) }
            #expect(error == .truncated || error == .checksumMismatch, "cut \(cut)")
        }
    }

    @Test("the structure is checked behind a valid checksum")
    func structureBehindValidChecksum() {
        let v4 = [UInt8]([0x04, 192, 168, 1, 5])
        let v6 = [UInt8]([0x06] + [UInt8](repeating: 0xAB, count: 16))
        func parse(_ payload: [UInt8]) throws(PairingCodeError) -> PairingCode {
            try PairingCode.parse(Fixture.text(payload: payload))
        }
        #expect(throws: Never.self) { try parse(Fixture.payload(entries: [v4, v6])) }
        for flags: UInt8 in [0x01, 0x02, 0x80, 0xFF] {
            #expect(throws: PairingCodeError.unknownFlags(flags)) { try parse(Fixture.payload(flags: flags)) }
        }
        #expect(throws: PairingCodeError.tooManyAddresses(9)) {
            try parse(Fixture.payload(entries: Array(repeating: v4, count: 9)))
        }
        #expect(throws: PairingCodeError.tooManyAddresses(255)) { try parse(Fixture.payload(count: 255, entries: [])) }
        for family: UInt8 in [0x00, 0x05, 0x41, 0xFF] {
            #expect(throws: PairingCodeError.invalidAddressFamily(family)) {
                try parse(Fixture.payload(entries: [v4, [family, 1, 2, 3, 4]]))
            }
        }
        // The count asks for more than there is, and an address stops short.
        #expect(throws: PairingCodeError.truncated) { try parse(Fixture.payload(count: 2, entries: [v4])) }
        #expect(throws: PairingCodeError.truncated) { try parse(Fixture.payload(entries: [Array(v6.prefix(9))])) }
        #expect(throws: PairingCodeError.truncated) { try parse(Array(Fixture.payload().prefix(60))) }
        // Bytes after the last address.
        #expect(throws: PairingCodeError.trailingBytes) { try parse(Fixture.payload(count: 1, entries: [v4, [0x00]])) }
        #expect(throws: PairingCodeError.trailingBytes) { try parse(Fixture.payload(count: 1, entries: [v4, v4])) }
    }

    // MARK: Building and expiry

    @Test("the initializer checks lengths and count")
    func initializerChecks() {
        let key = Fixture.key
        let secret = Fixture.secret
        func make(_ key: [UInt8], _ secret: [UInt8], _ addresses: [PairingAddress]) throws(PairingCodeError) {
            _ = try PairingCode(publicKey: key, secret: secret, expiry: 1, port: 1, addresses: addresses)
        }
        #expect(throws: PairingCodeError.invalidLength(field: "publicKey")) {
            try make(Array(key.prefix(31)), secret, [])
        }
        #expect(throws: PairingCodeError.invalidLength(field: "publicKey")) { try make(key + [0], secret, []) }
        #expect(throws: PairingCodeError.invalidLength(field: "secret")) { try make(key, [], []) }
        #expect(throws: PairingCodeError.invalidLength(field: "address")) { try make(key, secret, [.ipv4([1, 2, 3])]) }
        #expect(throws: PairingCodeError.invalidLength(field: "address")) {
            try make(key, secret, [.ipv6([1, 2, 3, 4])])
        }
        #expect(throws: PairingCodeError.tooManyAddresses(9)) {
            try make(key, secret, Array(repeating: Fixture.v4a, count: 9))
        }
        #expect(throws: Never.self) { try make(key, secret, Array(repeating: Fixture.v6, count: 8)) }
    }

    @Test("expiry: valid while now < expiry")
    func expiry() {
        let code = Fixture.code([Fixture.v4a])
        #expect(throws: Never.self) { try code.checkNotExpired(now: 0) }
        #expect(throws: Never.self) { try code.checkNotExpired(now: Fixture.expiry - 1) }
        #expect(throws: PairingCodeError.expired(secondsAgo: 0)) { try code.checkNotExpired(now: Fixture.expiry) }
        #expect(throws: PairingCodeError.expired(secondsAgo: 150)) {
            try code.checkNotExpired(now: Fixture.expiry + 150)
        }
        #expect(throws: Never.self) { try code.checkNotExpired(now: Fixture.expiry + 299, allowedClockSkew: 300) }
        #expect(throws: PairingCodeError.expired(secondsAgo: 300)) {
            try code.checkNotExpired(now: Fixture.expiry + 300, allowedClockSkew: 300)
        }
        var late = code
        late.expiry = .max
        #expect(throws: Never.self) { try late.checkNotExpired(now: .max - 1, allowedClockSkew: .max) }
    }

    @Test("messages say what happened; hints say what to do")
    func messages() {
        let errors: [PairingCodeError] = [
            .missingPrefix, .unsupportedVersion(2), .invalidCharacter("U", position: 9),
            .invalidCharacter("\u{A0}", position: 3),
            .checksumMismatch, .truncated, .trailingBytes, .unknownFlags(0x80), .invalidLength(field: "secret"),
            .tooManyAddresses(9), .invalidAddressFamily(5), .expired(secondsAgo: 0), .expired(secondsAgo: 1),
            .expired(secondsAgo: 200), .expired(secondsAgo: 90_000),
        ]
        for error in errors {
            let text = error.description
            #expect(text.first!.isLowercase && !text.hasSuffix("."), "\(text)")
            if case .invalidLength = error {
                #expect(error.hint == nil)
            } else {
                let hint = error.hint!
                #expect(hint.first!.isLowercase && !hint.hasSuffix("."), "\(hint)")
            }
        }
        #expect(PairingCodeError.invalidCharacter("U", position: 9).description.contains("'U' at position 9"))
        #expect(PairingCodeError.invalidCharacter("\u{A0}", position: 3).description.contains("U+00A0"))
        #expect(PairingCodeError.checksumMismatch.hint == "check the code for a mistyped character, or copy it again")
        #expect(PairingCodeError.expired(secondsAgo: 200).description == "the pairing code expired 3 minutes ago")
        #expect(
            PairingCodeError.expired(secondsAgo: 5).hint!.hasPrefix(
                "run `speakbridge pair` on the desktop for a new code"))
        #expect(PairingCodeError.unsupportedVersion(2).description.contains("version 2"))
        #expect(PairingCodeError.unsupportedVersion(999).description.contains("protocol version 999,"))
    }

    @Test("description and mirror do not show the secret")
    func secretIsRedacted() {
        let code = Fixture.code([Fixture.v4a])
        var dumped = ""
        dump(code, to: &dumped)
        for shown in [code.description, dumped, String(describing: code), String(reflecting: code)] {
            #expect(!shown.contains("224"), "\(shown)")  // 0xE0, the first secret byte, in decimal
            #expect(!shown.lowercased().contains("e0e1"), "\(shown)")
            #expect(shown.contains("redacted"))
        }
    }

    // MARK: Garbage

    @Test("the parser never crashes on 10,000 random strings")
    func fuzzRandomStrings() throws {
        var random = SplitMix64(seed: 0xF022)
        let pool = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZabcxyzOoIiLlUu -\t\r\n:$%*+./SB1é€\u{0}\u{A0}😀")
        var succeeded = 0
        for index in 0..<10_000 {
            var text = index % 3 == 0 ? "SB1:" : ""
            for _ in 0..<Int.random(in: 0...220, using: &random) {
                text.append(pool.randomElement(using: &random)!)
            }
            if let code = try? PairingCode.parse(text) {
                succeeded += 1
                #expect(try PairingCode.parse(code.encoded()) == code)
            }
        }
        #expect(succeeded == 0)
    }

    @Test("the parser never crashes on 10,000 random mutations of valid codes, and never accepts a different code")
    func fuzzMutations() {
        var random = SplitMix64(seed: 0x3A7E)
        let pool = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZabcxyzOoIiLlUu -\t\n:$%*+./é\u{0}😀")
        for index in 0..<10_000 {
            let original = Fixture.samples[index % Fixture.samples.count]
            var text = Array(original.encoded())
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let position = Int.random(in: 0..<max(1, text.count), using: &random)
                switch Int.random(in: 0..<6, using: &random) {
                case 0 where !text.isEmpty: text[position] = pool.randomElement(using: &random)!
                case 1: text.insert(pool.randomElement(using: &random)!, at: min(position, text.count))
                case 2 where !text.isEmpty: text.remove(at: position)
                case 3 where position + 1 < text.count: text.swapAt(position, position + 1)
                case 4: text.removeLast(Int.random(in: 0...text.count, using: &random))
                case 5: text.insert(contentsOf: text[position..<min(text.count, position + 7)], at: position)
                default: break
                }
            }
            do {
                let parsed = try PairingCode.parse(String(text))
                // Only harmless edits (an alias, a dash, a space, a swap of equal symbols) leave a valid code.
                #expect(parsed == original, "\(String(text))")
            } catch {
                #expect(!error.description.isEmpty)
            }
        }
    }
}

@Suite("Pairing address")
struct PairingAddressTests {
    @Test("parses and prints IPv4 and IPv6 with inet_pton/inet_ntop")
    func parseAndPrint() {
        #expect(PairingAddress("192.168.1.5") == .ipv4([192, 168, 1, 5]))
        #expect(PairingAddress("::1") == .ipv6(Array(repeating: 0, count: 15) + [1]))
        #expect(PairingAddress("fe80::1") == .ipv6([0xFE, 0x80] + Array(repeating: 0, count: 13) + [1]))
        for text in [
            "192.168.1.5", "0.0.0.0", "255.255.255.255", "::1", "::", "fe80::1", "fd00::1",
            "2001:db8::ff00:42:8329", "::ffff:1.2.3.4",
        ] {
            #expect(PairingAddress(text)?.description == text)
        }
        #expect(PairingAddress("FD00:0:0::0001")?.description == "fd00::1")
    }

    @Test("rejects anything else, including zones and embedded NUL")
    func rejects() {
        for text in [
            "", " 1.2.3.4", "1.2.3.4 ", "1.2.3", "256.1.1.1", "1.2.3.4.5", "fe80::1%eth0", "fe80::1%2",
            "[::1]", "::1::", "localhost", "1.2.3.4\u{0}", "1.2.3.4\u{0}junk", "١.٢.٣.٤",
        ] {
            #expect(PairingAddress(text) == nil, "\(text.debugDescription)")
        }
        #expect(PairingAddress.ipv4([1, 2, 3]).description == "invalid address")
    }
}

@Suite("Device ID")
struct DeviceIDTests {
    static let digest: [UInt8] = Array(0x00...0x1F)

    @Test("known answer: digest 00 01 … 1F → first 10 bytes 00…09 → 000G-40R4-0M30-E209")
    func knownAnswer() {
        // 00…09 in base32 is worked by hand in Base32Tests.knownAnswers.
        let id = DeviceID(publicKeyDigest: Self.digest)
        #expect(id.description == "000G-40R4-0M30-E209")
        #expect(id.compact == "000G40R40M30E209")
        #expect(id.bytes == Array(0x00...0x09))
        #expect(DeviceID(publicKeyDigest: Array(repeating: 0xFF, count: 32)).description == "ZZZZ-ZZZZ-ZZZZ-ZZZZ")
    }

    @Test("parses what a user types: any case, with or without dashes, O/I/L")
    func parse() throws {
        let id = DeviceID(publicKeyDigest: Self.digest)
        for text in [
            "000G-40R4-0M30-E209", "000G40R40M30E209", "000g-40r4-0m30-e209", "ooog40r4om3oe2o9",
            " 000G 40R4 0M30 E209\n",
        ] {
            #expect(try DeviceID(parsing: text) == id, "\(text)")
        }
        #expect(Set([try DeviceID(parsing: "000g40r40m30e209"), id]).count == 1)
    }

    @Test("format/parse round trip for random digests")
    func roundTrip() throws {
        var random = SplitMix64(seed: 0x1D)
        for _ in 0..<500 {
            let digest = random.bytes(32)
            let id = DeviceID(publicKeyDigest: digest)
            #expect(id.bytes == Array(digest.prefix(10)))
            #expect(id.description.count == 19)
            #expect(try DeviceID(parsing: id.description) == id)
            #expect(try DeviceID(parsing: id.compact.lowercased()) == id)
        }
    }

    @Test("rejects wrong lengths and characters")
    func rejects() {
        #expect(throws: DeviceIDError.invalidLength(symbolCount: 0)) { try DeviceID(parsing: "") }
        #expect(throws: DeviceIDError.invalidLength(symbolCount: 15)) { try DeviceID(parsing: "000G-40R4-0M30-E20") }
        #expect(throws: DeviceIDError.invalidLength(symbolCount: 17)) { try DeviceID(parsing: "000G-40R4-0M30-E2090") }
        #expect(throws: DeviceIDError.invalidLength(symbolCount: 32)) {
            try DeviceID(parsing: "000G40R40M30E209000G40R40M30E209")
        }
        #expect(throws: DeviceIDError.invalidCharacter("U", position: 19)) {
            try DeviceID(parsing: "000G-40R4-0M30-E20U")
        }
        #expect(throws: DeviceIDError.invalidCharacter("_", position: 5)) {
            try DeviceID(parsing: "000G_40R4-0M30-E209")
        }
        #expect(throws: DeviceIDError.invalidCharacter(":", position: 4)) {
            try DeviceID(parsing: "SB1:000G40R40M30E209")
        }
    }

    @Test("Codable as the dashed string")
    func codable() throws {
        let id = DeviceID(publicKeyDigest: Self.digest)
        let json = String(decoding: try JSONEncoder().encode([id]), as: UTF8.self)
        #expect(json == #"["000G-40R4-0M30-E209"]"#)
        #expect(try JSONDecoder().decode([DeviceID].self, from: Data(#"["000g40r40m30e209"]"#.utf8)) == [id])
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode([DeviceID].self, from: Data(#"["000G-40R4"]"#.utf8))
        }
    }
}
