import SpeakBridgeSupport

/// A small, strict JSON value with its own parser and a deterministic encoder.
///
/// Why not Foundation's JSONSerialization: peer input is hostile, so the parser bounds nesting depth and
/// input size, keeps integers exact (sequence numbers are 64-bit), tells `true` from `1`, and rejects
/// duplicate keys, lone surrogates and trailing garbage. The encoder writes keys in the order given, so
/// the frames in `Pairing/vectors/` are byte-for-byte reproducible.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.integer(a), .integer(b)): return a == b
        case let (.double(a), .double(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var boolValue: Bool? { if case .bool(let b) = self { return b }; return nil }
    public var int64Value: Int64? { if case .integer(let i) = self { return i }; return nil }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a }; return nil }
    /// Integers and finite doubles as a Double (for times in seconds).
    public var doubleValue: Double? {
        switch self {
        case .integer(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }
}

public enum JSONError: Error, Equatable, Sendable, CustomStringConvertible {
    case syntax(offset: Int, String)
    case tooDeep
    case tooLarge

    public var description: String {
        switch self {
        case let .syntax(offset, what): return "malformed JSON at byte \(offset): \(what)"
        case .tooDeep: return "JSON nested too deeply"
        case .tooLarge: return "JSON document too large"
        }
    }
}

// MARK: - Encoding

extension JSONValue {
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(into: &out)
        return out
    }

    func write(into out: inout [UInt8]) {
        switch self {
        case .null: out += Array("null".utf8)
        case .bool(let b): out += Array((b ? "true" : "false").utf8)
        case .integer(let i): out += Array(String(i).utf8)
        case .double(let d):
            if d.isFinite { out += Array(String(d).utf8) } else { out += Array("null".utf8) }
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Writes `s` as a JSON string. Besides what JSON requires (quote, backslash, C0), DEL, the C1 controls, the
    /// bidi controls and U+2028/9 are written as `\uXXXX` (every scalar `PeerText.needsEscape` names), so JSON
    /// output (`devices --json`, `status --json`) shown on a terminal carries no escape sequence either.
    static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = s
        text.withUTF8 { writeEscaped($0, into: &out) }
        out.append(UInt8(ascii: "\""))
    }

    /// Exactly how many bytes `writeString` writes for `s`, without the quotes.
    public static func escapedSize(_ s: String) -> Int {
        var text = s
        return text.withUTF8 { escapedSize(utf8: $0) }
    }

    /// `escapedSize` of the string whose UTF-8 is `bytes`.
    static func escapedSize(utf8 bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var size = bytes.count  // each byte as itself, plus what escaping adds
        var i = 0
        while i < bytes.count {
            i = skipPlainWords(bytes, from: i)
            guard i < bytes.count else { break }
            let c = bytes[i]
            if c >= 0x20 && c < 0x7F && c != 0x22 && c != 0x5C {
                i += 1
                continue
            }
            if c < 0x80 {
                switch c {
                case 0x22, 0x5C, 0x0A, 0x0D, 0x09: size += 1  // two-byte escapes
                default: size += 5  // \u00XX
                }
                i += 1
                continue
            }
            let length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2
            guard i + length <= bytes.count else { i += 1; continue }
            var v = UInt32(c) & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07)
            for k in 1..<length { v = v << 6 | UInt32(bytes[i + k] & 0x3F) }
            if let scalar = Unicode.Scalar(v), PeerText.needsEscape(scalar) { size += 6 - length }
            i += length
        }
        return size
    }

    /// Skips whole eight-byte words of bytes that a JSON string writes as themselves (printable ASCII other than
    /// `"` and `\`), and a plain tail of fewer than eight; returns where the first word that may hold another byte
    /// starts (the caller reads it byte by byte), or the end. Each word test is exact about whether such a byte
    /// exists: a zero byte after XOR with `"`, `\` or DEL, a byte below 0x20, or a top bit (non-ASCII).
    @inline(__always)
    static func skipPlainWords(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        guard let base = bytes.baseAddress else { return start }
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var i = start
        while bytes.count - i >= 8 {
            // Inside the buffer: i + 8 <= bytes.count.
            let w = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
            let quote = w ^ (ones &* 0x22)
            let backslash = w ^ (ones &* 0x5C)
            let del = w ^ (ones &* 0x7F)
            let special = ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((del &- ones) & ~del)
                | ((w &- ones &* 0x20) & ~w) | w
            if special & highs != 0 { break }
            i += 8
        }
        // The last one to seven bytes as one word, padded with spaces (which a JSON string writes as themselves,
        // so the test stays exact): a plain tail is skipped at once instead of byte by byte by the caller.
        let rest = bytes.count - i
        if rest > 0 && rest < 8 {
            var w: UInt64
            if i - start >= 8 - rest {
                // The buffer's last eight bytes, in one load (inside it: i >= 8 - rest). Those before `i` were found
                // plain by this call's words, so the word test still says exactly whether the tail holds another
                // byte. (The byte-by-byte padding below cost about 100 instructions a line, a third of escaping one.)
                w = UnsafeRawPointer(base + (bytes.count - 8)).loadUnaligned(as: UInt64.self)
            } else {
                w = ones &* 0x20
                for k in 0..<rest {
                    let shift = UInt64(8 * k)
                    w = (w & ~(0xFF << shift)) | UInt64(base[i + k]) << shift
                }
            }
            let quote = w ^ (ones &* 0x22)
            let backslash = w ^ (ones &* 0x5C)
            let del = w ^ (ones &* 0x7F)
            let special = ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((del &- ones) & ~del)
                | ((w &- ones &* 0x20) & ~w) | w
            if special & highs == 0 { i = bytes.count }
        }
        return i
    }

    /// The body of `writeString`, over the string's UTF-8: runs of bytes that need nothing are copied at once
    /// (one scalar at a time through `unicodeScalars` cost 16 % of `send`'s CPU in a burst).
    static func writeEscaped(_ bytes: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        let hex: StaticString = "0123456789abcdef"
        var run = 0
        var i = 0
        func flush(_ end: Int) {
            if end > run { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<end])) }
        }
        func unicodeEscape(_ v: UInt32) {
            // Every scalar `PeerText.needsEscape` names is in the Basic Multilingual Plane: one \uXXXX each.
            out.append(UInt8(ascii: "\\"))
            out.append(UInt8(ascii: "u"))
            for shift in stride(from: 12, through: 0, by: -4) {
                out.append(hex.utf8Start[Int((v >> UInt32(shift)) & 0xF)])
            }
        }
        while i < bytes.count {
            i = skipPlainWords(bytes, from: i)
            guard i < bytes.count else { break }
            let c = bytes[i]
            if c >= 0x20 && c < 0x7F && c != 0x22 && c != 0x5C {
                i += 1
                continue
            }
            if c >= 0x80 {
                // A lead byte: the string is valid UTF-8, so its scalar is complete (checked anyway).
                let length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2
                guard i + length <= bytes.count else { i += 1; continue }
                var v = UInt32(c) & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07)
                for k in 1..<length { v = v << 6 | UInt32(bytes[i + k] & 0x3F) }
                if let scalar = Unicode.Scalar(v), PeerText.needsEscape(scalar) {
                    flush(i)
                    unicodeEscape(v)
                    run = i + length
                }
                i += length
                continue
            }
            flush(i)
            switch c {
            case 0x22: out.append(UInt8(ascii: "\\")); out.append(0x22)
            case 0x5C: out.append(UInt8(ascii: "\\")); out.append(0x5C)
            case 0x0A: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "r"))
            case 0x09: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "t"))
            default: unicodeEscape(UInt32(c))  // the other C0 controls and DEL
            }
            i += 1
            run = i
        }
        flush(bytes.count)
    }
}

// MARK: - Parsing

extension JSONValue {
    /// Parses exactly one JSON value (surrounding whitespace allowed).
    public static func parse(_ bytes: [UInt8], maxDepth: Int = 8, maxBytes: Int = 65_535) throws(JSONError) -> JSONValue {
        guard bytes.count <= maxBytes else { throw .tooLarge }
        var parser = JSONParser(bytes: bytes, maxDepth: maxDepth)
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw .syntax(offset: parser.index, "trailing data") }
        return value
    }
}

struct JSONParser {
    let bytes: [UInt8]
    let maxDepth: Int
    var index = 0

    init(bytes: [UInt8], maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    func fail(_ what: String) -> JSONError { .syntax(offset: index, what) }

    mutating func expect(_ literal: String) throws(JSONError) {
        for b in literal.utf8 {
            guard index < bytes.count, bytes[index] == b else { throw fail("expected \(literal)") }
            index += 1
        }
    }

    mutating func parseValue(depth: Int) throws(JSONError) -> JSONValue {
        guard index < bytes.count else { throw fail("unexpected end") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "n"): try expect("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    /// Up to this many members an object's keys are compared one by one (no hashing: every message has a few).
    static let keysSearchedInLine = 16

    mutating func parseObject(depth: Int) throws(JSONError) -> JSONValue {
        guard depth <= maxDepth else { throw .tooDeep }
        index += 1
        var members: [(String, JSONValue)] = []
        // The keys so far, once there are more than `Self.keysSearchedInLine`: a frame of 8,000 short keys searched
        // member by member took 0.25 s to parse (quadratic), stalling every device's frames behind it. `Set`
        // compares as `String ==` does (canonical equivalence), so the verdict is the same either way.
        var keys: Set<String> = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected object key") }
            let key = try parseString()
            let duplicate: Bool
            if members.count < Self.keysSearchedInLine {
                duplicate = members.contains(where: { $0.0 == key })
            } else {
                if keys.isEmpty { keys = Set(members.lazy.map(\.0)) }
                duplicate = !keys.insert(key).inserted
            }
            if duplicate { throw fail("duplicate key \"\(PeerText.utf8Prefix(key, maxBytes: 64))\"") }
            skipWhitespace()
            try expect(":")
            skipWhitespace()
            members.append((key, try parseValue(depth: depth)))
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end in object") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
            throw fail("expected , or }")
        }
    }

    mutating func parseArray(depth: Int) throws(JSONError) -> JSONValue {
        guard depth <= maxDepth else { throw .tooDeep }
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
        while true {
            skipWhitespace()
            items.append(try parseValue(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end in array") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
            throw fail("expected , or ]")
        }
    }

    mutating func parseHex4() throws(JSONError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("short \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let d: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw fail("bad hex digit")
            }
            v = v << 4 | d
            index += 1
        }
        return v
    }

    mutating func parseString() throws(JSONError) -> String {
        index += 1  // opening quote
        // Fast path: a string without escapes becomes a String straight from its bytes (no copy byte by byte).
        var end = index
        while end < bytes.count, bytes[end] >= 0x20, bytes[end] != UInt8(ascii: "\""), bytes[end] != UInt8(ascii: "\\") {
            end += 1
        }
        if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
            let start = index
            index = end + 1
            guard let s = String(validating: bytes[start..<end], as: UTF8.self) else { throw fail("invalid UTF-8") }
            return s
        }
        var out: [UInt8] = Array(bytes[index..<end])
        index = end
        while index < bytes.count {
            let c = bytes[index]
            if c == UInt8(ascii: "\"") {
                index += 1
                guard let s = String(validating: out, as: UTF8.self) else { throw fail("invalid UTF-8") }
                return s
            }
            if c < 0x20 { throw fail("control character in string") }
            if c != UInt8(ascii: "\\") { out.append(c); index += 1; continue }
            index += 1
            guard index < bytes.count else { break }
            let e = bytes[index]
            index += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try parseHex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                    else { throw fail("lone surrogate") }
                    index += 2
                    let low = try parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw fail("lone surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw fail("lone surrogate")
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("bad code point") }
                out += Array(String(Character(u)).utf8)
            default: throw fail("bad escape")
            }
        }
        throw fail("unterminated string")
    }

    mutating func parseNumber() throws(JSONError) -> JSONValue {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else { throw fail("bad number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > digits else { throw fail("bad fraction") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > digits else { throw fail("bad exponent") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let i = Int64(text) { return .integer(i) }
        guard let d = Double(text), d.isFinite else { throw fail("number out of range") }
        return .double(d)
    }
}
