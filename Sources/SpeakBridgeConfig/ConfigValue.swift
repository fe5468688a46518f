import SpeakBridgeProtocol

/// A config value: a string, an integer, a number or a boolean. Nothing else travels (no null, arrays, objects).
///
/// Numbers, integer or not, lie within ±`maxNumberMagnitude` (2^53 − 1): every entry point (`init(parsing:)` for
/// `config set`, `init(json:)` for a peer's offer and for `settings.json`, `validate` before a store keeps one)
/// refuses a larger one, never rounds it.
public enum ConfigValue: Sendable, Equatable {
    case string(String)
    case integer(Int64)
    case double(Double)
    case bool(Bool)

    /// Largest string value in UTF-8 bytes: a long API key or a prompt, far below one frame.
    public static let maxStringBytes = 4_096

    /// Largest magnitude of a number value: 2^53 − 1 = 9,007,199,254,740,991 (JavaScript's
    /// `Number.MAX_SAFE_INTEGER`, RFC 7493's I-JSON range). Up to it every integer is exactly one IEEE double, so a
    /// JSON reader that holds numbers as doubles reads what was written and can tell that it is in range; beyond
    /// it 2^53 + 1 reads as 2^53 there, and this package's own parser turns integers past Int64 into rounded
    /// doubles. Such a number is refused wherever it enters, never carried rounded; as text (`--string`) it is
    /// kept exactly.
    public static let maxNumberMagnitude: Int64 = (1 << 53) - 1

    /// Size counted against a pending quota: a string's UTF-8 bytes, 8 for a number or a boolean.
    public var bytes: Int {
        if case .string(let s) = self { return s.utf8.count }
        return 8
    }

    public var json: JSONValue {
        switch self {
        case .string(let s): return .string(s)
        case .integer(let i): return .integer(i)
        case .double(let d): return .double(d)
        case .bool(let b): return .bool(b)
        }
    }

    public var typeName: String {
        switch self {
        case .string: return "string"
        case .integer, .double: return "number"
        case .bool: return "boolean"
        }
    }

    /// Reads a value from JSON (a peer's or the store's), enforcing the limits.
    public init(json: JSONValue, key: String) throws(ConfigError) {
        switch json {
        case .string(let s):
            try Self.checkString(s, key: key)
            self = .string(s)
        case .integer(let i):
            try Self.checkNumber(Double(exactly: i) ?? .infinity, key: key)
            self = .integer(i)
        case .double(let d):
            guard d.isFinite else { throw ConfigError(.malformed, "the value of \(key) is not a finite number") }
            try Self.checkNumber(d, key: key)
            self = .double(d)
        case .bool(let b): self = .bool(b)
        default:
            throw ConfigError(.malformed, "the value of \(key) must be a string, a number or a boolean")
        }
    }

    /// Reads a value typed on the command line: `true`/`false`, an integer, a decimal number, else a string.
    /// `forceString` keeps `"42"` a string. A number beyond ±`maxNumberMagnitude` (or past Int64, or past what a
    /// double holds) is refused (`tooLarge`), not silently kept as text: the user meant a number.
    public init(parsing text: String, key: String, forceString: Bool = false) throws(ConfigError) {
        if !forceString {
            if text == "true" { self = .bool(true); return }
            if text == "false" { self = .bool(false); return }
            if let i = Int64(text) {
                try Self.checkNumber(Double(exactly: i) ?? .infinity, key: key)
                self = .integer(i)
                return
            }
            let digits = text.first == "-" || text.first == "+" ? text.dropFirst() : Substring(text)
            if !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) {
                try Self.checkNumber(.infinity, key: key)  // an integer past Int64
            }
            if text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }), text.first != ".",
               let d = Double(text), text.allSatisfy({ "0123456789.eE+-".contains($0) }) {
                try Self.checkNumber(d, key: key)  // also refuses an overflow to infinity
                self = .double(d)
                return
            }
        }
        try Self.checkString(text, key: key)
        self = .string(text)
    }

    /// What every entry point checks, for a value built in code: the string rules, the number range. A store
    /// keeps no value it could not read back from `settings.json`.
    public func validate(key: String) throws(ConfigError) {
        switch self {
        case .string(let s): try Self.checkString(s, key: key)
        case .integer(let i): try Self.checkNumber(Double(exactly: i) ?? .infinity, key: key)
        case .double(let d):
            guard d.isFinite else { throw ConfigError(.malformed, "the value of \(key) is not a finite number") }
            try Self.checkNumber(d, key: key)
        case .bool: break
        }
    }

    /// Numbers lie within ±`maxNumberMagnitude`. Takes a Double: every Int64 within the range converts exactly,
    /// one outside converts to a value outside it or is passed as infinity. The message names the key, never the
    /// value (it may reach a peer and a log).
    static func checkNumber(_ n: Double, key: String) throws(ConfigError) {
        guard n.magnitude <= Double(maxNumberMagnitude) else {
            throw ConfigError(.tooLarge, "the number for \(key) is beyond ±9007199254740991 (2^53 - 1), the largest every JSON reader holds exactly",
                              hint: "keep it as text: `speakbridge config set \(key) VALUE --string`")
        }
    }

    /// Strings are at most 4 KiB and carry no control characters (except tab and line feed) and no bidi
    /// overrides: values end up in terminals, so a peer must not be able to smuggle escape sequences in.
    static func checkString(_ s: String, key: String) throws(ConfigError) {
        guard s.utf8.count <= maxStringBytes else {
            throw ConfigError(.tooLarge, "the value of \(key) is longer than \(maxStringBytes) bytes")
        }
        for scalar in s.unicodeScalars {
            let v = scalar.value
            let control = (v < 0x20 && v != 0x09 && v != 0x0A) || (0x7F...0x9F).contains(v)
            let bidi = (0x202A...0x202E).contains(v) || (0x2066...0x2069).contains(v) || v == 0x200E || v == 0x200F
            if control || bidi {
                throw ConfigError(.malformed, "the value of \(key) contains a control or bidi character (U+\(String(v, radix: 16, uppercase: true)))")
            }
        }
    }

    /// For listings: strings in JSON quotes (escapes visible), numbers and booleans bare.
    public var display: String { String(decoding: json.encoded(), as: UTF8.self) }

    /// For `config get`: the string itself, or the number or boolean.
    public var plain: String {
        if case .string(let s) = self { return s }
        return display
    }
}
