// pairing-codes.json: valid codes with every field, tolerant spellings of one code, and one or more codes for each
// error `PairingCode.parse` can report. Every expectation is computed by the package's own parser and checked
// against what the case was built to show, so a vector can never silently test something else.
import SpeakBridgeCrypto
import SpeakBridgeProtocol

enum PairingCodeVectors {
    static let expiry: UInt32 = 1_767_225_600  // 2026-01-01T00:00:00Z
    static let port: UInt16 = 47_810

    static func address(_ text: String) throws -> PairingAddress {
        guard let a = PairingAddress(text) else { throw GeneratorError("bad address \(text)") }
        return a
    }

    static func code(_ addresses: [String]) throws -> PairingCode {
        try PairingCode(publicKey: FixedKeys.desktopStatic.publicKey.rawRepresentation, secret: FixedKeys.pairingSecret,
                        expiry: expiry, port: port, addresses: addresses.map(address))
    }

    /// The code used in PROTOCOL.md's worked example and in handshakes.json.
    static func example() throws -> PairingCode { try code(["192.0.2.10", "2001:db8::10"]) }

    /// Error names in the files are the cases of `PairingCodeError`.
    static func errorName(_ error: PairingCodeError) -> String {
        switch error {
        case .missingPrefix: return "missingPrefix"
        case .unsupportedVersion: return "unsupportedVersion"
        case .invalidCharacter: return "invalidCharacter"
        case .checksumMismatch: return "checksumMismatch"
        case .truncated: return "truncated"
        case .trailingBytes: return "trailingBytes"
        case .unknownFlags: return "unknownFlags"
        case .invalidLength: return "invalidLength"
        case .tooManyAddresses: return "tooManyAddresses"
        case .invalidAddressFamily: return "invalidAddressFamily"
        case .expired: return "expired"
        }
    }

    /// payload || CRC32(payload), big-endian.
    static func withChecksum(_ payload: [UInt8]) -> [UInt8] {
        let crc = CRC32.checksum(payload)
        return payload + [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: crc >> $0) }
    }

    static func text(_ payload: [UInt8]) -> String {
        PairingCode.prefix + CrockfordBase32.encode(withChecksum(payload))
    }

    /// The payload of the example code, for building damaged ones.
    static func examplePayload() throws -> [UInt8] {
        let encoded = try example().encoded()
        let bytes = try CrockfordBase32.decode(encoded.dropFirst(PairingCode.prefix.count))
        return Array(bytes.dropLast(4))
    }

    static func fields(_ code: PairingCode) -> JSONValue {
        .object([
            ("version", .integer(1)),
            ("flags", .integer(0)),
            ("public_key", code.publicKey.hexJSON),
            ("secret", code.secret.hexJSON),
            ("expiry", .integer(Int64(code.expiry))),
            ("port", .integer(Int64(code.port))),
            ("addresses", .array(code.addresses.map { .string($0.description) })),
        ])
    }

    static func document() throws -> JSONValue {
        let example = try example()
        let exampleText = example.encoded()
        let body = String(exampleText.dropFirst(PairingCode.prefix.count))

        // Valid codes.
        let validCases: [(String, [String])] = [
            ("no-addresses", []),
            ("one-ipv4", ["192.0.2.10"]),
            ("ipv4-and-ipv6", ["192.0.2.10", "2001:db8::10"]),
            ("eight-addresses", ["192.0.2.10", "192.0.2.11", "198.51.100.7", "203.0.113.99", "2001:db8::10",
                                 "2001:db8::11", "fd00::1", "127.0.0.1"]),
        ]
        var valid: [JSONValue] = []
        for (name, addresses) in validCases {
            let code = try code(addresses)
            let text = code.encoded()
            let parsed = try PairingCode.parse(text)
            try require(parsed == code, "valid code \(name) does not round-trip")
            let bytes = try CrockfordBase32.decode(text.dropFirst(PairingCode.prefix.count))
            valid.append(.object([
                ("name", name.json),
                ("code", text.json),
                ("bytes", bytes.hexJSON),
                ("fields", fields(code)),
                ("desktop_id", KeySchedule.deviceID(of: FixedKeys.desktopStatic.publicKey).description.json),
            ]))
        }

        // Other spellings of the example code that must parse to the same fields.
        func grouped(_ s: String, by n: Int, separator: String) -> String {
            var out = ""
            for (i, c) in s.enumerated() {
                if i > 0 && i % n == 0 { out += separator }
                out.append(c)
            }
            return out
        }
        let aliased = String(body.map { c -> Character in
            switch c {
            case "0": return "O"
            case "1": return "l"
            default: return c
            }
        })
        let spellings: [(String, String)] = [
            ("lower case", (PairingCode.prefix + body).lowercased()),
            ("groups of four joined by -", PairingCode.prefix + grouped(body, by: 4, separator: "-")),
            ("groups of eight, spaces and a line break", PairingCode.prefix + " " + grouped(body, by: 8, separator: " ")
                .replacingFirstSpace(after: 80, with: "\r\n")),
            ("leading whitespace", " \t\n" + exampleText),
            ("O for 0 and l for 1", PairingCode.prefix + aliased),
            ("I for 1", PairingCode.prefix + body.replacingAll("1", with: "I")),
        ]
        var variants: [JSONValue] = []
        for (description, text) in spellings {
            try require(try PairingCode.parse(text) == example, "spelling \"\(description)\" does not parse")
            variants.append(.object([("description", description.json), ("code", text.json),
                                     ("same_as", "ipv4-and-ipv6".json)]))
        }

        // Invalid codes.
        let payload = try examplePayload()
        var invalidCases: [(String, String, String)] = []  // (description, code, intended error)
        invalidCases.append(("no prefix", body, "missingPrefix"))
        invalidCases.append(("empty string", "", "missingPrefix"))
        invalidCases.append(("prefix without colon", "SB1" + body, "missingPrefix"))
        invalidCases.append(("prefix with a leading zero", "SB01:" + body, "missingPrefix"))
        invalidCases.append(("another prefix", "XB1:" + body, "missingPrefix"))
        invalidCases.append(("prefix of version 2", "SB2:" + body, "unsupportedVersion"))
        invalidCases.append(("prefix of version 0 (a lone 0 is a version)", "SB0:" + body, "unsupportedVersion"))
        invalidCases.append(("prefix of version 999 (three digits, reported as 999)", "SB999:" + body,
                             "unsupportedVersion"))
        invalidCases.append(("prefix with four digits", "SB1000:" + body, "missingPrefix"))
        invalidCases.append(("prefix 00 (a leading zero)", "SB00:" + body, "missingPrefix"))
        var v2 = payload
        v2[0] = 2
        invalidCases.append(("payload version byte 2 under an SB1: prefix (checksum valid)", text(v2), "unsupportedVersion"))
        invalidCases.append(("U is not in the alphabet", PairingCode.prefix + body.replacingCharacter(at: 20, with: "U"),
                             "invalidCharacter"))
        invalidCases.append(("* is not in the alphabet", PairingCode.prefix + body.replacingCharacter(at: 57, with: "*"),
                             "invalidCharacter"))
        invalidCases.append(("non-zero padding bits in the last symbol", exampleText.bumpingLastSymbol(),
                             "invalidCharacter"))
        invalidCases.append(("one symbol mistyped", PairingCode.prefix + body.substitutingSymbol(at: 40),
                             "checksumMismatch"))
        invalidCases.append(("two neighbouring symbols swapped", PairingCode.prefix + body.swappingSymbols(at: 90),
                             "checksumMismatch"))
        invalidCases.append(("shorter than the smallest code", PairingCode.prefix + String(body.prefix(100)),
                             "truncated"))
        invalidCases.append(("last four symbols missing", String(exampleText.dropLast(4)), "truncated"))
        var shortList = Array(payload.prefix(73 + 5))
        shortList[72] = 2
        invalidCases.append(("count says 2 addresses, one present (checksum valid)", text(shortList), "truncated"))
        // Rule 5.2 reads the family bytes up to the end of ALL the bytes (the 4 that should be the checksum
        // included). 81 bytes is no possible length; the count says 3.
        var cut = Array(payload.prefix(73 + 5))
        cut[72] = 3
        invalidCases.append((
            "damaged, impossible length; the second family byte, read where the checksum would be, is 0x00 (rule 5.2 does not apply)",
            PairingCode.prefix + CrockfordBase32.encode(cut + [0x00, 0x11, 0x22]), "checksumMismatch"))
        invalidCases.append((
            "damaged, impossible length; the family bytes (0x04, 0x04, then none) run past the end of all the bytes",
            PairingCode.prefix + CrockfordBase32.encode(cut + [0x04, 0x11, 0x22]), "truncated"))
        invalidCases.append(("extra symbols after the code", exampleText + "0000", "trailingBytes"))
        invalidCases.append(("one extra symbol after the code", exampleText + "7", "trailingBytes"))
        invalidCases.append(("a byte after the last address (checksum valid)", text(payload + [0]), "trailingBytes"))
        var flags = payload
        flags[1] = 0x01
        invalidCases.append(("unknown flag bit (checksum valid)", text(flags), "unknownFlags"))
        var nine = Array(payload.prefix(73))
        nine[72] = 9
        for _ in 0..<9 { nine += [4, 192, 0, 2, 10] }
        invalidCases.append(("nine addresses (checksum valid)", text(nine), "tooManyAddresses"))
        var family = payload
        family[73] = 0x05
        invalidCases.append(("address family 0x05 (checksum valid)", text(family), "invalidAddressFamily"))

        var invalid: [JSONValue] = []
        for (description, text, intended) in invalidCases {
            let got: PairingCodeError
            do {
                _ = try PairingCode.parse(text)
                throw GeneratorError("invalid code \"\(description)\" parsed")
            } catch let error as PairingCodeError {
                got = error
            }
            let name = errorName(got)
            try require(name == intended, "invalid code \"\(description)\": expected \(intended), parser says \(name)")
            var members: [(String, JSONValue)] = [("description", description.json), ("code", text.json),
                                                  ("error", name.json)]
            // The version a client should name when it asks the user to update.
            if case .unsupportedVersion(let version) = got { members.append(("version", .integer(Int64(version)))) }
            invalid.append(.object(members))
        }

        // Expiry, by the reader's clock.
        var expiryChecks: [JSONValue] = []
        for (now, description) in [(expiry - 1, "one second before expiry"), (expiry, "at expiry"),
                                   (expiry + 3_600, "an hour after expiry")] {
            var expired = false
            do { try example.checkNotExpired(now: now) } catch { expired = true }
            expiryChecks.append(.object([("description", description.json), ("code", exampleText.json),
                                         ("now", .integer(Int64(now))),
                                         ("error", expired ? "expired".json : .null)]))
        }

        return .object([
            ("description", "SpeakBridge protocol v1 pairing codes; see Pairing/PROTOCOL.md, \"Pairing code\"".json),
            ("valid", .array(valid)),
            ("variants", .array(variants)),
            ("invalid", .array(invalid)),
            ("expiry", .array(expiryChecks)),
        ])
    }
}

extension String {
    func replacingAll(_ target: Character, with replacement: Character) -> String {
        String(map { $0 == target ? replacement : $0 })
    }

    func replacingCharacter(at index: Int, with c: Character) -> String {
        var chars = Array(self)
        chars[index] = c
        return String(chars)
    }

    /// Replaces the symbol at `index` by the next one in the alphabet.
    func substitutingSymbol(at index: Int) -> String {
        var chars = Array(self)
        let alphabet = CrockfordBase32.alphabet
        let i = alphabet.firstIndex(of: chars[index]) ?? 0
        chars[index] = alphabet[(i + 1) % alphabet.count]
        return String(chars)
    }

    /// Swaps the symbol at `index` with the next different one.
    func swappingSymbols(at index: Int) -> String {
        var chars = Array(self)
        var j = index + 1
        while chars[j] == chars[index] { j += 1 }
        chars.swapAt(index, j)
        return String(chars)
    }

    /// Sets the lowest bit of the last symbol (a padding bit when the bit count is not a multiple of 5).
    func bumpingLastSymbol() -> String {
        var chars = Array(self)
        let alphabet = CrockfordBase32.alphabet
        let i = alphabet.firstIndex(of: chars[chars.count - 1]) ?? 0
        chars[chars.count - 1] = alphabet[i | 1]
        return String(chars)
    }

    /// Replaces the first space at or after character `offset` (for a line break inside a grouped code).
    func replacingFirstSpace(after offset: Int, with replacement: String) -> String {
        var chars = Array(self)
        guard let i = chars.indices.first(where: { $0 >= offset && chars[$0] == " " }) else { return self }
        chars.replaceSubrange(i...i, with: Array(replacement))
        return String(chars)
    }
}
