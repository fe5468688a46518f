// Small helpers of the generator: deterministic keys, and a pretty printer whose output is stable byte for byte
// (keys in the order given, two-space indent, one trailing newline), so that `--check` can compare files exactly.
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeSupport

/// Every fixed key and secret is SHA-256 of an ASCII label ("nothing up my sleeve"): an implementation can derive
/// them itself, and the vectors README lists the labels.
enum FixedKeys {
    static func bytes(_ label: String) -> [UInt8] { SHA256.hash(Array(label.utf8)) }

    static func privateKey(_ label: String) -> X25519PrivateKey {
        do {
            return try X25519PrivateKey(rawRepresentation: bytes(label))
        } catch {
            fatalError("speakbridge-vectors: cannot make the key \"\(label)\": \(error)")
        }
    }

    static let desktopStatic = privateKey("speakbridge.v1 vectors: desktop static")
    static let clientStatic = privateKey("speakbridge.v1 vectors: client static")
    static let desktopEphemeralPairing = privateKey("speakbridge.v1 vectors: desktop ephemeral pairing")
    static let clientEphemeralPairing = privateKey("speakbridge.v1 vectors: client ephemeral pairing")
    static let desktopEphemeralSession = privateKey("speakbridge.v1 vectors: desktop ephemeral session")
    static let clientEphemeralSession = privateKey("speakbridge.v1 vectors: client ephemeral session")
    static let pairingSecret = bytes("speakbridge.v1 vectors: pairing secret")
    static let transportKey = bytes("speakbridge.v1 vectors: transport key")

    static let labels: [(String, String)] = [
        ("desktop_static_private", "speakbridge.v1 vectors: desktop static"),
        ("client_static_private", "speakbridge.v1 vectors: client static"),
        ("desktop_ephemeral_private (pairing)", "speakbridge.v1 vectors: desktop ephemeral pairing"),
        ("client_ephemeral_private (pairing)", "speakbridge.v1 vectors: client ephemeral pairing"),
        ("desktop_ephemeral_private (session)", "speakbridge.v1 vectors: desktop ephemeral session"),
        ("client_ephemeral_private (session)", "speakbridge.v1 vectors: client ephemeral session"),
        ("pairing secret", "speakbridge.v1 vectors: pairing secret"),
        ("frames key", "speakbridge.v1 vectors: transport key"),
    ]
}

/// A failed consistency check inside the generator: the Swift implementation disagrees with itself or with the
/// vector being written. Never written to a file.
struct GeneratorError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func require(_ condition: Bool, _ what: @autoclosure () -> String) throws {
    if !condition { throw GeneratorError(what()) }
}

enum PrettyJSON {
    /// The document as the files hold it.
    static func render(_ value: JSONValue) -> String {
        var out = ""
        write(value, indent: 0, into: &out)
        out.append("\n")
        return out
    }

    static func scalar(_ value: JSONValue) -> String {
        String(decoding: value.encoded(), as: UTF8.self)
    }

    static func write(_ value: JSONValue, indent: Int, into out: inout String) {
        let pad = String(repeating: "  ", count: indent + 1)
        let closePad = String(repeating: "  ", count: indent)
        switch value {
        case .array(let items) where items.isEmpty:
            out.append("[]")
        case .array(let items) where items.allSatisfy(isShortScalar):
            out.append("[" + items.map(scalar).joined(separator: ", ") + "]")
        case .array(let items):
            out.append("[\n")
            for (i, item) in items.enumerated() {
                out.append(pad)
                write(item, indent: indent + 1, into: &out)
                out.append(i + 1 < items.count ? ",\n" : "\n")
            }
            out.append(closePad + "]")
        case .object(let members) where members.isEmpty:
            out.append("{}")
        case .object(let members):
            out.append("{\n")
            for (i, (key, member)) in members.enumerated() {
                out.append(pad + scalar(.string(key)) + ": ")
                write(member, indent: indent + 1, into: &out)
                out.append(i + 1 < members.count ? ",\n" : "\n")
            }
            out.append(closePad + "}")
        default:
            out.append(scalar(value))
        }
    }

    static func isShortScalar(_ value: JSONValue) -> Bool {
        switch value {
        case .null, .bool, .integer, .double: return true
        case .string(let s): return s.utf8.count <= 40
        default: return false
        }
    }
}

extension String {
    var json: JSONValue { .string(self) }
}

extension Array where Element == UInt8 {
    var hexJSON: JSONValue { .string(Hex.encode(self)) }
    var utf8Text: String { String(decoding: self, as: UTF8.self) }
}
