#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import SpeakBridgeKeyring
import SpeakBridgeStore
import SpeakBridgeSupport

/// Secrets in the Secret Service (libsecret, through `SpeakBridgeKeyring`): one item per reference, schema
/// `org.speakbridge.Secret`, attributes `home` (this installation's config directory) and `ref`.
///
/// Secrets written earlier to `config/secrets.json` (while no keyring was available) stay there and stay readable:
/// a reference not found in the keyring is looked up in the file, and `prune` removes unused references from both.
/// So a file secret leaves the file when its key is set again or deleted; nothing is moved behind the user's back.
/// The other way round does not work: a process that uses the file backend (no session bus, or
/// `SPEAKBRIDGE_SECRETS=file`) cannot read what was stored in the keyring.
public struct SecretServiceBackend: SecretBackend {
    let keyring: SecretServiceKeyring
    let file: FileSecretBackend

    public init(keyring: SecretServiceKeyring, file: FileSecretBackend) {
        self.keyring = keyring
        self.file = file
    }

    public var summary: String { "Secret Service (libsecret, \(SecretServiceKeyring.schemaName), home=\(keyring.home))" }

    public func value(ref: String) throws(ConfigError) -> String? {
        if let v = try mapped({ () throws(KeyringError) in try keyring.lookup(ref: ref) }) { return v }
        return try file.value(ref: ref)
    }

    /// The keyring per reference; the references it lacks from the file, read once.
    public func values(refs: [String]) throws(ConfigError) -> [String: String] {
        var out: [String: String] = [:]
        var missing: [String] = []
        for ref in refs {
            if let v = try mapped({ () throws(KeyringError) in try keyring.lookup(ref: ref) }) { out[ref] = v } else { missing.append(ref) }
        }
        out.merge(try file.values(refs: missing)) { keyring, _ in keyring }
        return out
    }

    public func put(_ secrets: [String: String]) throws(ConfigError) {
        for ref in secrets.keys.sorted() {
            try mapped { () throws(KeyringError) in
                try keyring.store(ref: ref, value: secrets[ref]!, label: "SpeakBridge secret (\(keyring.home))")
            }
        }
    }

    public func prune(keeping refs: Set<String>) throws(ConfigError) {
        let stored = try mapped { () throws(KeyringError) in try keyring.refs() }
        for ref in stored.subtracting(refs).sorted() {
            try mapped { () throws(KeyringError) in _ = try keyring.clear(ref: ref) }
        }
        try file.prune(keeping: refs)
    }

    func mapped<T>(_ body: () throws(KeyringError) -> T) throws(ConfigError) -> T {
        do {
            return try body()
        } catch {
            throw .local(error.description, hint: "unlock the keyring, or set SPEAKBRIDGE_SECRETS=file to keep new secrets in \(file.path)")
        }
    }
}

/// Which secret backend an installation uses, chosen once per `ConfigStore` (so per command, and once per daemon).
///
/// `SPEAKBRIDGE_SECRETS`:
/// - unset, empty or `auto`: the Secret Service when `DBUS_SESSION_BUS_ADDRESS` is set and the service answers a
///   search that cannot prompt within 3 s, else the file;
/// - `file`: always the file (tests, headless machines, or to keep the CLI and a daemon without a session together);
/// - `secret-service`: the Secret Service or an error saying why not.
public enum SecretBackends {
    public static let environmentKey = "SPEAKBRIDGE_SECRETS"

    public static func choose(for home: Home,
                              environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigError) -> any SecretBackend {
        let file = FileSecretBackend(path: home.config + "/secrets.json")
        let mode = environment[environmentKey] ?? ""
        switch mode {
        case "file":
            return file
        case "", "auto", "secret-service":
            do throws(KeyringError) {
                guard let bus = environment["DBUS_SESSION_BUS_ADDRESS"], !bus.isEmpty else {
                    throw KeyringError.unavailable("DBUS_SESSION_BUS_ADDRESS is not set")
                }
                let keyring = try SecretServiceKeyring.probe(home: canonical(home.config))
                return SecretServiceBackend(keyring: keyring, file: file)
            } catch {
                if case .libraryMissing(let missing) = error {
                    // A session bus but no libsecret (it is loaded on first use, not linked): say so, never silently.
                    if mode == "secret-service" { throw .local(error.description, hint: missing.hint) }
                    Console.warning("\(error.description); secrets go to \(file.path) until the Debian package "
                                    + "\(missing.package) is installed")
                    return file
                }
                if mode == "secret-service" {
                    throw .local(error.description, hint: "start a keyring daemon in this session, or set \(environmentKey)=file")
                }
                return file
            }
        default:
            throw .local("\(environmentKey)=\(PeerText.escape(mode, limit: 32)) is not a secret backend",
                         hint: "use file, secret-service or auto")
        }
    }

    /// The config directory with symlinks resolved, so that one installation reached by two paths is one `home`.
    public static func canonical(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
