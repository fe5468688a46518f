import SpeakBridgeProtocol

/// A config value: a string, an integer, a number or a boolean. Nothing else travels (no null, arrays, objects).
public enum ConfigValue: Sendable, Equatable {
    case string(String)
    case integer(Int64)
    case double(Double)
    case bool(Bool)

    /// Largest string value in UTF-8 bytes: a long API key or a prompt, far below one frame.
    public static let maxStringBytes = 4_096

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
        case .integer(let i): self = .integer(i)
        case .double(let d):
            guard d.isFinite else { throw ConfigError(.malformed, "the value of \(key) is not a finite number") }
            self = .double(d)
        case .bool(let b): self = .bool(b)
        default:
            throw ConfigError(.malformed, "the value of \(key) must be a string, a number or a boolean")
        }
    }

    /// Reads a value typed on the command line: `true`/`false`, an integer, a decimal number, else a string.
    /// `forceString` keeps `"42"` a string.
    public init(parsing text: String, key: String, forceString: Bool = false) throws(ConfigError) {
        if !forceString {
            if text == "true" { self = .bool(true); return }
            if text == "false" { self = .bool(false); return }
            if let i = Int64(text) { self = .integer(i); return }
            if text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }), text.first != ".",
               let d = Double(text), d.isFinite, text.allSatisfy({ "0123456789.eE+-".contains($0) }) {
                self = .double(d)
                return
            }
        }
        try Self.checkString(text, key: key)
        self = .string(text)
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
