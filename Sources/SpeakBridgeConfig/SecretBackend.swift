#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeProtocol
import SpeakBridgeStore

/// Where secret values live. The settings document refers to each by an opaque random reference; a commit
/// first `put`s new secrets, then replaces the document (the commit point), then `prune`s what no record uses.
/// A crash in between leaves unreferenced secrets at worst, removed by the next commit: never a record whose
/// secret is missing.
public protocol SecretBackend: Sendable {
    /// For `config list`: e.g. `file (0600) /home/u/.config/speakbridge/secrets.json`.
    var summary: String { get }
    func value(ref: String) throws(ConfigError) -> String?
    /// The values of `refs` that exist, in one pass where the backend can (the file is read once, not once per
    /// reference: a pull of every secret read and parsed the whole file per secret).
    func values(refs: [String]) throws(ConfigError) -> [String: String]
    func put(_ secrets: [String: String]) throws(ConfigError)
    func prune(keeping refs: Set<String>) throws(ConfigError)
}

extension SecretBackend {
    public func values(refs: [String]) throws(ConfigError) -> [String: String] {
        var out: [String: String] = [:]
        for ref in refs { if let v = try value(ref: ref) { out[ref] = v } }
        return out
    }
}

/// Secrets in `config/secrets.json`, mode 0600 in a 0700 directory, replaced atomically (`FileIO.atomicWrite`);
/// read only if it is ours and private (`FileIO.read`). Used when no Secret
/// Service answers on the session bus, or when `SPEAKBRIDGE_SECRETS=file` (see `SecretBackends`).
public struct FileSecretBackend: SecretBackend {
    public let path: String

    public init(path: String) {
        self.path = path
    }

    public var summary: String { "file (0600) \(path)" }

    public func value(ref: String) throws(ConfigError) -> String? { try load()[ref] }

    public func values(refs: [String]) throws(ConfigError) -> [String: String] {
        guard !refs.isEmpty else { return [:] }
        let all = try load()
        var out: [String: String] = [:]
        for ref in refs { if let v = all[ref] { out[ref] = v } }
        return out
    }

    public func put(_ secrets: [String: String]) throws(ConfigError) {
        guard !secrets.isEmpty else { return }
        var all = try load()
        all.merge(secrets) { _, new in new }
        try save(all)
    }

    public func prune(keeping refs: Set<String>) throws(ConfigError) {
        let all = try load()
        let kept = all.filter { refs.contains($0.key) }
        if kept.count != all.count { try save(kept) }
    }

    func load() throws(ConfigError) -> [String: String] {
        let bytes: [UInt8]?
        // FileIO.read refuses a symlink, a file owned by someone else, or any group/other permission.
        do { bytes = try FileIO.read(path, leaked: "replace the API keys in it") } catch {
            throw .local(error.description, hint: error.hint)
        }
        guard let bytes else { return [:] }
        guard let doc = try? JSONValue.parse(bytes, maxDepth: 4, maxBytes: 64 << 20),
              case .object(let members)? = doc["secrets"] else {
            throw .local("\(path) is damaged", hint: "move it away and set the secrets again")
        }
        var out: [String: String] = [:]
        for (ref, value) in members { if let s = value.stringValue { out[ref] = s } }
        return out
    }

    func save(_ secrets: [String: String]) throws(ConfigError) {
        let doc = JSONValue.object([("version", .integer(1)),
                                    ("secrets", .object(secrets.keys.sorted().map { ($0, .string(secrets[$0]!)) }))])
        do { try FileIO.atomicWrite(path, doc.encoded() + [0x0A]) } catch { throw .local(error.description, hint: error.hint) }
    }
}
