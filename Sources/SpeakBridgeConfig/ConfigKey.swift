/// Config keys: dotted names such as `deepgram.apiKey` or `transcription.locale`.
///
/// Rules (each stops a bug class or an attack): 1–128 bytes; 1–8 segments separated by `.`; each segment
/// 1–64 characters of `A-Z a-z 0-9 _ -`; the first character is a letter. Keys become JSON object members and
/// terminal output, so nothing else is allowed (no escapes, no look-alike Unicode, no path separators).
public enum ConfigKey {
    public static let maxBytes = 128
    public static let maxSegments = 8
    public static let maxSegmentBytes = 64

    /// First segments that name trust, never configuration: pairings, devices, identity keys, the consent policy and
    /// the config of the config itself (`speakbridge.*`). Compared case-insensitively. Such keys are refused by
    /// `config set`, never offered, and a batch from a peer that contains one is rejected whole.
    public static let reservedRoots: Set<String> = [
        "speakbridge", "devices", "device", "peers", "peer", "pairing", "pairings", "identity", "trust", "policy",
        "psk",
    ]

    /// Last-segment words that make a key secret by default (`deepgram.apiKey`, `openrouter.token`, …).
    static let secretWords = ["apikey", "api_key", "api-key", "token", "secret", "password", "passphrase", "privatekey"]

    public static func isValid(_ key: String) -> Bool { (try? validate(key)) != nil }

    public static func validate(_ key: String) throws(ConfigError) {
        let bytes = Array(key.utf8)
        guard (1...maxBytes).contains(bytes.count) else {
            throw ConfigError(.malformed, "a key has 1 to \(maxBytes) bytes (got \(bytes.count))")
        }
        let segments = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.count <= maxSegments else {
            throw ConfigError(.malformed, "a key has at most \(maxSegments) dotted segments")
        }
        for segment in segments {
            guard (1...maxSegmentBytes).contains(segment.count), segment.allSatisfy(isKeyByte) else {
                throw ConfigError(.malformed, "malformed key \"\(printable(key))\": dotted names of A-Z a-z 0-9 _ - (like deepgram.apiKey)")
            }
        }
        guard let first = bytes.first, isLetter(first) else {
            throw ConfigError(.malformed, "malformed key \"\(printable(key))\": it must start with a letter")
        }
    }

    /// True for keys under a reserved first segment (see `reservedRoots`).
    public static func isReserved(_ key: String) -> Bool {
        let root = key.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? key
        return reservedRoots.contains(root.lowercased())
    }

    /// True when the key's last segment names a credential: stored as a secret even without `--secret`.
    public static func looksSecret(_ key: String) -> Bool {
        let last = key.split(separator: ".").last.map { $0.lowercased() } ?? ""
        return secretWords.contains { last.contains($0) }
    }

    static func isLetter(_ b: UInt8) -> Bool { (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) }

    static func isKeyByte(_ b: UInt8) -> Bool {
        isLetter(b) || (b >= 0x30 && b <= 0x39) || b == UInt8(ascii: "_") || b == UInt8(ascii: "-")
    }

    /// A key for an error message: at most 64 characters, anything outside the key alphabet as `?`.
    static func printable(_ key: String) -> String {
        String(String.UnicodeScalarView(key.unicodeScalars.prefix(64).map { s in
            s.isASCII && (isKeyByte(UInt8(s.value)) || s == ".") ? s : "?"
        }))
    }
}
