import ArgumentParser
import FoundationEssentials
import SpeakBridgeConfig
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

/// `speakbridge config …`: typed preferences and secrets, and their transfer between paired devices.
/// Local commands are here; push, pull and sync in `ConfigTransfer.swift`.
struct Config: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Preferences and API keys: set them here, move them to a paired device, with consent.",
        discussion: """
        Keys are dotted names (deepgram.apiKey, transcription.locale); values are strings, numbers or booleans.
        Secrets are shown masked (dg_…9f3a) unless `get --reveal`. Pairings, devices, identity and policies are
        never config and never travel.
        """,
        subcommands: [SetKey.self, Get.self, List.self, Unset.self, LocalOnly.self, Push.self, Pull.self, Sync.self,
                      Pending.self, Accept.self, Reject.self, Policy.self, Share.self])

    struct SetKey: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Set a key (VALUE `-` reads one line from stdin, keeping it out of shell history).")
        @OptionGroup var homeOptions: HomeOptions
        @Argument(help: "The key, e.g. deepgram.apiKey.") var key: String
        @Argument(help: "The value: true/false, a number, or text.") var value: String
        @Flag(name: .long, help: "Store as a secret (masked, 0600 / keyring). Keys named like *.apiKey, *.token are secret anyway.")
        var secret = false
        @Flag(name: .long, help: "Store as a plain value even if the name looks like a credential.") var plain = false
        @Flag(name: .long, help: "Keep the value text even if it looks like a number or boolean.") var string = false
        @Flag(name: .customLong("local-only"), help: "Never let this key leave this machine.") var localOnly = false

        func validate() throws {
            if secret && plain { throw ValidationError("--secret and --plain exclude each other") }
        }

        func run() throws {
            let store = try ConfigCLI.store(homeOptions.resolved)
            let text = value == "-" ? (readLine(strippingNewline: true) ?? "") : value
            let record = try ConfigCLI.run {
                try store.update { tx throws(ConfigError) -> ConfigRecord in
                    let v = try ConfigValue(parsing: text, key: key, forceString: string || secret)
                    let r = try tx.set(key, v, secret: secret ? true : plain ? false : nil)
                    if localOnly { try tx.setLocalOnly(key, true) }
                    return r
                }
            }
            Console.info("set \(key)\(record.isSecret ? " (secret)" : "")\(localOnly ? " (local-only)" : "")")
        }
    }

    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "get", abstract: "Print a key's value (secrets masked unless --reveal).")
        @OptionGroup var homeOptions: HomeOptions
        @Argument(help: "The key.") var key: String
        @Flag(name: .long, help: "Print a secret in full (on this machine's stdout only).") var reveal = false
        @Flag(name: .long, help: "Print JSON.") var json = false

        func run() throws {
            let tx = try ConfigCLI.run { try ConfigCLI.store(homeOptions.resolved).read() }
            guard let record = tx.document.records[key], !record.isDeleted else {
                let hint = tx.document.pending(of: key).first.map { "a change from \"\($0.fromName)\" waits: `speakbridge config pending`" }
                throw CLIError("\(PeerText.escape(key, limit: 128)) is not set", hint: hint ?? "list the keys with `speakbridge config list`")
            }
            let shown = try ConfigCLI.run { try tx.shown(record, reveal: reveal) }
            if json {
                Console.out(String(decoding: ConfigCLI.json(record, tx: tx, reveal: reveal).encoded(), as: UTF8.self))
            } else if case .value(let v) = record.body {
                Console.out(v.plain)
            } else {
                Console.out(shown)
                if !reveal { Console.info("secret: masked; `--reveal` prints it in full") }
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List keys (secrets masked), where secrets are kept, the policy.")
        @OptionGroup var homeOptions: HomeOptions
        @Flag(name: .long, help: "Print JSON.") var json = false
        @Flag(name: .long, help: "Also list deletions (tombstones).") var all = false

        func run() throws {
            let store = try ConfigCLI.store(homeOptions.resolved)
            let tx = try ConfigCLI.run { try store.read() }
            let doc = tx.document
            let records = doc.records.keys.sorted().map { doc.records[$0]! }.filter { all || !$0.isDeleted }
            let backend = store.secrets.summary
            if json {
                Console.out(String(decoding: JSONValue.object([
                    ("entries", .array(records.map { ConfigCLI.json($0, tx: tx, reveal: false) })),
                    ("secrets", .string(backend)),
                    ("policy", .string(doc.policy.defaultPolicy.rawValue)),
                    ("devicePolicies", .object(doc.policy.devices.map { ($0.key.description, .string($0.value.rawValue)) })),
                    ("share", .string(doc.policy.share.rawValue)),
                    ("pending", .integer(Int64(doc.pending.count))),
                    ("staged", .integer(Int64(tx.outbox.items.count))),
                ]).encoded(), as: UTF8.self))
                return
            }
            for r in records {
                let shown = (try? tx.shown(r, reveal: false)) ?? "?"
                var flags: [String] = []
                if r.isSecret { flags.append("secret") }
                if doc.localOnly.contains(r.key) { flags.append("local-only") }
                Console.out("\(r.key) = \(shown)" + (flags.isEmpty ? "" : "  (\(flags.joined(separator: ", ")))"))
            }
            Console.out("# secrets: \(backend)")
            Console.out("# policy: \(doc.policy.defaultPolicy.rawValue)"
                        + doc.policy.devices.map { " (\($0.key): \($0.value.rawValue))" }.joined()
                        + "; share: \(doc.policy.share.rawValue)")
            if !doc.pending.isEmpty { Console.out("# pending: \(doc.pending.count) change(s) from peers; see `speakbridge config pending`") }
            if !tx.outbox.items.isEmpty { Console.out("# staged: \(tx.outbox.items.count) push/pull item(s) waiting for a device to connect") }
        }
    }

    struct Unset: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "unset", abstract: "Delete a key (the deletion syncs to paired devices).")
        @OptionGroup var homeOptions: HomeOptions
        @Argument(help: "The key.") var key: String

        func run() throws {
            let store = try ConfigCLI.store(homeOptions.resolved)
            try ConfigCLI.run { try store.update { tx throws(ConfigError) in try tx.unset(key) } }
            Console.info("unset \(key)")
        }
    }

    struct LocalOnly: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "local-only", abstract: "Mark a key local-only: it never leaves this machine, and peers' values for it are ignored.")
        @OptionGroup var homeOptions: HomeOptions
        @Argument(help: "The key.") var key: String
        @Flag(name: .long, help: "Remove the mark.") var off = false

        func run() throws {
            let store = try ConfigCLI.store(homeOptions.resolved)
            try ConfigCLI.run { try store.update { tx throws(ConfigError) in try tx.setLocalOnly(key, !off) } }
            Console.info(off ? "\(key) may be shared again" : "\(key) is local-only")
        }
    }

    struct Pending: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pending", abstract: "Show changes from peers that wait for your consent (secrets masked).")
        @OptionGroup var homeOptions: HomeOptions
        @Flag(name: .long, help: "Print JSON.") var json = false

        func run() throws {
            let tx = try ConfigCLI.run { try ConfigCLI.store(homeOptions.resolved).read() }
            let pending = tx.document.pending.keys.sorted().map { tx.document.pending[$0]! }
            let paired = try ConfigCLI.pairedDevices(homeOptions.resolved)
            let formatter = Date.ISO8601FormatStyle()
            func here(_ key: String) -> String {
                guard let r = tx.document.records[key], !r.isDeleted else { return "(not set)" }
                return (try? tx.shown(r, reveal: false)) ?? "?"
            }
            if json {
                Console.out(String(decoding: JSONValue.array(pending.map { p -> JSONValue in
                    .object([("key", .string(p.record.key)), ("from", .string(p.from.description)),
                             ("name", .string(p.fromName)), ("received", .integer(p.received)),
                             ("here", .string(here(p.record.key))),
                             ("incoming", .string((try? tx.shown(p.record, reveal: false)) ?? "?")),
                             ("secret", .bool(p.record.isSecret)), ("version", .string(p.record.version.description)),
                             ("paired", .bool(paired.contains(p.from)))])
                }).encoded(), as: UTF8.self))
                return
            }
            guard !pending.isEmpty else {
                Console.info("nothing pending")
                return
            }
            for p in pending {
                let when = formatter.format(Date(timeIntervalSince1970: Double(p.received)))
                Console.out("\(p.record.key)  from \"\(PeerText.escape(p.fromName, limit: 64))\" (\(p.from)) at \(when)\(p.record.isSecret ? "  (secret)" : "")"
                            + (paired.contains(p.from) ? "" : "  (device no longer paired: accept skips it)"))
                Console.out("  - \(here(p.record.key))")
                Console.out("  + \((try? tx.shown(p.record, reveal: false)) ?? "?")")
            }
            Console.info("apply with `speakbridge config accept [KEY…]`, drop with `speakbridge config reject [KEY…]`")
        }
    }

    struct Accept: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "accept", abstract: "Apply pending changes (all, or the keys given).")
        @OptionGroup var homeOptions: HomeOptions
        @Argument(help: "Keys (default: all pending).") var keys: [String] = []

        func run() throws {
            let home = homeOptions.resolved
            let store = try ConfigCLI.store(home)
            let paired = try ConfigCLI.pairedDevices(home)
            let done = try ConfigCLI.run {
                try store.update { tx throws(ConfigError) in
                    try tx.acceptPending(keys.isEmpty ? nil : keys, paired: { paired.contains($0) })
                }
            }
            if done.applied.isEmpty && done.superseded.isEmpty && done.unpaired.isEmpty { Console.info("nothing pending") }
            if !done.applied.isEmpty { Console.info("applied \(done.applied.count): \(done.applied.joined(separator: ", "))") }
            if !done.superseded.isEmpty {
                Console.info("dropped \(done.superseded.count) already superseded here: \(done.superseded.joined(separator: ", "))")
            }
            if !done.unpaired.isEmpty {
                Console.warning("not applied \(done.unpaired.count) from a device that is no longer paired: "
                                + PeerText.escape(done.unpaired.joined(separator: ", "), limit: 512))
                Console.info("hint: drop them with `speakbridge config reject \(PeerText.escape(done.unpaired.joined(separator: " "), limit: 512))`")
            }
        }
    }

    struct Reject: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reject", abstract: "Drop pending changes (all, or the keys given).")
        @OptionGroup var homeOptions: HomeOptions
        @Argument(help: "Keys (default: all pending).") var keys: [String] = []

        func run() throws {
            let store = try ConfigCLI.store(homeOptions.resolved)
            let dropped = try ConfigCLI.run {
                try store.update { tx throws(ConfigError) in try tx.rejectPending(keys.isEmpty ? nil : keys) }
            }
            Console.info(dropped.isEmpty ? "nothing pending" : "rejected \(dropped.count): \(dropped.joined(separator: ", "))")
        }
    }

    struct Policy: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "policy",
            abstract: "Show or set what happens to changes from peers: accept, ask (default) or deny.",
            discussion: "The policy is local trust: it is never sent, and no peer can change it.")
        @OptionGroup var homeOptions: HomeOptions
        @Argument(help: "accept, ask or deny.") var policy: String?
        @Option(name: .long, help: "Set it for one paired device only (ID, prefix or name).") var device: String?
        @Flag(name: .long, help: "With --device: remove that device's own policy.") var reset = false

        func run() throws {
            let home = homeOptions.resolved
            let store = try ConfigCLI.store(home)
            var target: Peer?
            if let device { target = try ConfigCLI.peer(home, device) }
            let wanted: ConsentPolicy?
            if let policy {
                guard let p = ConsentPolicy(rawValue: policy) else { throw CLIError("unknown policy \"\(policy)\"", hint: "use accept, ask or deny") }
                wanted = p
            } else {
                wanted = nil
            }
            let settings = try ConfigCLI.run {
                try store.update { tx throws(ConfigError) -> PolicySettings in
                    if let target, reset { tx.document.policy.devices[target.id] = nil }
                    if let wanted {
                        if let target { tx.document.policy.devices[target.id] = wanted } else { tx.document.policy.defaultPolicy = wanted }
                    }
                    return tx.document.policy
                }
            }
            Console.out("default: \(settings.defaultPolicy.rawValue)")
            for (id, p) in settings.devices.sorted(by: { $0.key.description < $1.key.description }) {
                Console.out("\(id): \(p.rawValue)")
            }
        }
    }

    struct Share: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "share",
            abstract: "Show or set what a paired device gets when it pulls: public (default: no secrets), all or none.",
            discussion: """
            With `all`, every paired device can pull every secret (API keys, tokens) without asking. Local-only keys \
            never leave in any mode. `config push` sends what you name regardless.
            """)
        @OptionGroup var homeOptions: HomeOptions
        @Argument(help: "all, public or none.") var mode: String?

        func run() throws {
            let store = try ConfigCLI.store(homeOptions.resolved)
            var wanted: ShareMode?
            if let mode {
                guard let m = ShareMode(rawValue: mode) else { throw CLIError("unknown share mode \"\(mode)\"", hint: "use all, public or none") }
                wanted = m
            }
            let share = try ConfigCLI.run {
                try store.update { tx throws(ConfigError) -> ShareMode in
                    if let wanted { tx.document.policy.share = wanted }
                    return tx.document.policy.share
                }
            }
            Console.out("share: \(share.rawValue)")
            if wanted == .all {
                Console.warning("every paired device can now pull every secret on this machine without asking; `speakbridge config share public` undoes it")
            }
        }
    }
}

/// Shared helpers of the config commands.
enum ConfigCLI {
    static func store(_ home: Home) throws -> ConfigStore {
        do {
            let identity = try Identity.loadOrCreate(home)
            return try run { try ConfigStore(home: home, device: identity.deviceID) }
        } catch let error as StoreError {
            throw CLIError(error)
        }
    }

    /// Runs a config operation, turning its error into the CLI's.
    static func run<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as ConfigError {
            throw CLIError(error.message, hint: error.hint)
        } catch let error as StoreError {
            throw CLIError(error)
        }
    }

    /// The IDs of the devices paired now (`config accept` applies changes only from these).
    static func pairedDevices(_ home: Home) throws -> Set<DeviceID> {
        do { return Set(try PeerStore(home: home).all.map(\.id)) } catch { throw CLIError(error) }
    }

    static func peer(_ home: Home, _ query: String) throws -> Peer {
        let peers: PeerStore
        do { peers = try PeerStore(home: home) } catch { throw CLIError(error) }
        guard let peer = peers.find(query) else {
            throw CLIError("no paired device matches \"\(query)\"", hint: "list them with `speakbridge devices`")
        }
        return peer
    }

    static func json(_ r: ConfigRecord, tx: ConfigTransaction, reveal: Bool) -> JSONValue {
        var m: [(String, JSONValue)] = [("key", .string(r.key))]
        switch r.body {
        case .value(let v): m.append(("value", v.json))
        case .deleted: m.append(("deleted", .bool(true)))
        case .secret:
            m.append(("secret", .bool(true)))
            m.append((reveal ? "value" : "masked", .string((try? tx.shown(r, reveal: reveal)) ?? "?")))
        }
        m.append(("localOnly", .bool(tx.document.localOnly.contains(r.key))))
        m.append(("version", .string(r.version.description)))
        return .object(m)
    }
}
