#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeConfig
import SpeakBridgeKeyring
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

func temporaryHome(_ label: String) -> Home {
    let root = NSTemporaryDirectory() + "sbk-\(label)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    return Home(config: root + "/config", state: root + "/state", runtime: root + "/run")
}

/// Removes what `temporaryHome` made (its config's parent directory), so that no run leaves it behind in /tmp.
func removeTemporaryHome(_ home: Home) {
    try? FileManager.default.removeItem(atPath: (home.config as NSString).deletingLastPathComponent)
}

@Suite struct KeyringFileBackendTests {
    @Test func fileIsForcedByEnvironment() throws {
        let home = temporaryHome("forced")
        defer { removeTemporaryHome(home) }
        try home.prepare()
        let backend = try SecretBackends.choose(for: home, environment: [
            "SPEAKBRIDGE_SECRETS": "file", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent",
        ])
        #expect(backend is FileSecretBackend)
        #expect(backend.summary == "file (0600) \(home.config)/secrets.json")
    }

    @Test func fileWithoutSessionBus() throws {
        let home = temporaryHome("nobus")
        defer { removeTemporaryHome(home) }
        try home.prepare()
        #expect(try SecretBackends.choose(for: home, environment: [:]) is FileSecretBackend)
        // Forcing the Secret Service without a bus is an error that says why, not a silent file.
        #expect(throws: ConfigError.self) {
            try SecretBackends.choose(for: home, environment: ["SPEAKBRIDGE_SECRETS": "secret-service"])
        }
        #expect(throws: ConfigError.self) { try SecretBackends.choose(for: home, environment: ["SPEAKBRIDGE_SECRETS": "kwallet"]) }
    }

    @Test func fileRoundTrip() throws {
        let home = temporaryHome("file")
        defer { removeTemporaryHome(home) }
        try home.prepare()
        let file = FileSecretBackend(path: home.config + "/secrets.json")
        try file.put(["r1": "sk-one-1234567890", "r2": "sk-two-1234567890"])
        #expect(try file.value(ref: "r1") == "sk-one-1234567890")
        var info = stat()
        #expect(stat(file.path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        try file.prune(keeping: ["r2"])
        #expect(try file.value(ref: "r1") == nil)
        #expect(try file.value(ref: "r2") == "sk-two-1234567890")
    }
}

/// The real Secret Service: gnome-keyring on a private session bus; `secret-tool` as an independent reader.
/// Serialized, and one test for the whole session: libsecret and GDBus keep one session-bus connection per
/// process, taken from `DBUS_SESSION_BUS_ADDRESS`, which this test sets for its own bus only while it runs.
@Suite(.serialized) struct KeyringSecretServiceTests {
    @Test func storeReadClearThroughGnomeKeyring() throws {
        guard PrivateSession.toolsInstalled else {
            print("skipped: gnome-keyring-daemon, dbus-daemon or secret-tool not installed (apt-get install gnome-keyring dbus libsecret-tools)")
            try Test.cancel("gnome-keyring, dbus-daemon or secret-tool not installed")
        }
        let session = try PrivateSession()
        let previous = getenv("DBUS_SESSION_BUS_ADDRESS").map { String(cString: $0) }
        setenv("DBUS_SESSION_BUS_ADDRESS", session.address, 1)
        defer {
            SecretServiceKeyring.disconnect()
            if let previous { setenv("DBUS_SESSION_BUS_ADDRESS", previous, 1) } else { unsetenv("DBUS_SESSION_BUS_ADDRESS") }
            session.stop()
        }
        let home = temporaryHome("ss")
        defer { removeTemporaryHome(home) }
        let other = temporaryHome("ss-other")
        defer { removeTemporaryHome(other) }
        try home.prepare()
        try other.prepare()
        let env = session.environment

        // A bus with no keyring on it: the file, quickly.
        let started = ContinuousClock.now
        #expect(try SecretBackends.choose(for: home, environment: env) is FileSecretBackend)
        #expect(ContinuousClock.now - started < .seconds(15))  // not D-Bus's 25 s call timeout
        #expect(throws: ConfigError.self) {
            try SecretBackends.choose(for: home, environment: env.merging(["SPEAKBRIDGE_SECRETS": "secret-service"]) { $1 })
        }
        SecretServiceKeyring.disconnect()

        try session.startKeyring()
        var chosen: (any SecretBackend)?
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let b = try? SecretBackends.choose(for: home, environment: env), b is SecretServiceBackend { chosen = b; break }
            SecretServiceKeyring.disconnect()
            usleep(100_000)
        }
        guard let backend = chosen else {
            print("skipped: gnome-keyring-daemon did not come up headless on a private bus: \(session.keyring?.output ?? "")")
            try Test.cancel("gnome-keyring-daemon did not answer on the private bus")
        }
        #expect(backend.summary.hasPrefix("Secret Service (libsecret, org.speakbridge.Secret, home="))
        #expect(try SecretBackends.choose(for: home, environment: env.merging(["SPEAKBRIDGE_SECRETS": "file"]) { $1 })
                is FileSecretBackend)

        // Store and read back through the backend.
        let secret = "sk-live-\(UInt64.random(in: 0...UInt64.max))"
        try backend.put(["ref-one": secret, "ref-two": "second-\(secret)"])
        #expect(try backend.value(ref: "ref-one") == secret)
        #expect(try backend.value(ref: "ref-missing") == nil)
        #expect(access(home.config + "/secrets.json", F_OK) != 0, "nothing written to the file")

        // An independent reader (secret-tool, libsecret's CLI in its own process) finds it by schema and attributes.
        let canonicalHome = SecretBackends.canonical(home.config)
        let lookup = try session.secretTool(["lookup", "xdg:schema", "org.speakbridge.Secret", "home", canonicalHome, "ref", "ref-one"])
        #expect(lookup.status == 0)
        #expect(lookup.output == secret)

        // Labels and attributes never contain the secret (secret-tool prints the value on its own `secret =` line).
        let search = try session.secretTool(["search", "--all", "xdg:schema", "org.speakbridge.Secret", "home", canonicalHome])
        let described = search.output.split(separator: "\n").map(String.init)
            .filter { $0.hasPrefix("label = ") || $0.hasPrefix("attribute.") }
        let labels = described.filter { $0.hasPrefix("label = ") }
        #expect(labels.count == 2, Comment(rawValue: search.output))
        #expect(described.contains("attribute.ref = ref-one"))
        #expect(!described.contains { $0.contains(secret) })

        // Another installation on the same machine does not see these items, and has its own.
        let otherBackend = try SecretBackends.choose(for: other, environment: env)
        #expect(try otherBackend.value(ref: "ref-one") == nil)
        try otherBackend.put(["ref-one": "other-installation"])
        #expect(try backend.value(ref: "ref-one") == secret)
        #expect(try otherBackend.value(ref: "ref-one") == "other-installation")

        // Prune clears what is no longer referenced, in this home only.
        try backend.prune(keeping: ["ref-one"])
        #expect(try backend.value(ref: "ref-two") == nil)
        #expect(try session.secretTool(["lookup", "xdg:schema", "org.speakbridge.Secret", "home", canonicalHome, "ref", "ref-two"]).output == "")
        #expect(try otherBackend.value(ref: "ref-one") == "other-installation")

        // A secret left in the file from before a keyring was there stays readable, and is pruned from the file.
        let file = FileSecretBackend(path: home.config + "/secrets.json")
        try file.put(["ref-file": "from-the-file"])
        #expect(try backend.value(ref: "ref-file") == "from-the-file")
        try backend.prune(keeping: ["ref-one"])
        #expect(try file.value(ref: "ref-file") == nil)

        // Clear by reference.
        let keyring = SecretServiceKeyring(home: canonicalHome)
        #expect(try keyring.clear(ref: "ref-one"))
        #expect(try keyring.lookup(ref: "ref-one") == nil)
        #expect(try keyring.clear(ref: "ref-one") == false)
        #expect(try session.secretTool(["lookup", "xdg:schema", "org.speakbridge.Secret", "home", canonicalHome, "ref", "ref-one"]).status != 0)

        // The whole store: `config set --secret` puts the value in the keyring, the document only holds a reference.
        let store = try ConfigStore(home: home, device: DeviceID(publicKeyDigest: [UInt8](repeating: 7, count: 32)), secrets: backend)
        try store.update { tx throws(ConfigError) in _ = try tx.set("deepgram.apiKey", .string(secret), secret: true) }
        let settings = try String(contentsOfFile: home.settingsFile, encoding: .utf8)
        #expect(!settings.contains(secret))
        let tx = try store.read()
        #expect(try tx.update(for: tx.document.records["deepgram.apiKey"]!).body == .secret(secret))
        #expect(try keyring.refs().count == 1)
        try store.update { tx throws(ConfigError) in try tx.unset("deepgram.apiKey") }
        #expect(try keyring.refs().isEmpty)
        try otherBackend.prune(keeping: [])
    }
}
