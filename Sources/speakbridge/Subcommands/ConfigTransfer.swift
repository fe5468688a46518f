import ArgumentParser
import FoundationEssentials
import SpeakBridgeClient
import SpeakBridgeConfig
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

/// `config push`, `config pull`, `config sync`.
///
/// On a capture device (paired with a desktop) they open a session to the desktop and exchange config there and
/// then. On the desktop, which cannot dial a phone, they stage the request in `state/config-outbox.json`; the
/// daemon hands it over the next time that device runs `config pull` or `config sync` (the daemon need not run
/// while staging).
extension Config {
    struct TransferOptions: ParsableArguments {
        @Option(name: .long, help: "Give up after SECONDS (capture device only).") var timeout: Double = 15
        @Option(name: .long, help: ArgumentHelp("Also try this desktop address (repeatable).", valueName: "HOST:PORT"))
        var address: [String] = []

        func candidates() throws -> [Candidate] {
            try address.map { text in
                let (host, port) = try parseHostPort(text, defaultHost: "127.0.0.1")
                return Candidate(host: host, port: port, source: "--address")
            }
        }
    }

    struct Push: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "push",
            abstract: "Send keys (default: all that are not local-only) to a paired device.",
            discussion: "From a capture device: sent now. From the desktop: staged until that device next pulls or syncs.")
        @OptionGroup var homeOptions: HomeOptions
        @Option(name: .long, help: "The device (ID, prefix or name); needed when there are several.") var to: String?
        @Argument(help: "Keys to send (default: all that are not local-only).") var keys: [String] = []
        @OptionGroup var transfer: TransferOptions

        func run() throws {
            let home = homeOptions.resolved
            switch try ConfigTransfer.target(home, to) {
            case .desktop(let query):
                try ConfigTransfer.exchange(home, query, .push(keys.isEmpty ? nil : keys), accept: false, transfer)
            case .device(let peer):
                try ConfigTransfer.stage(home, peer, [.push], keys: keys.isEmpty ? nil : keys)
            }
        }
    }

    struct Pull: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pull",
            abstract: "Fetch keys (default: all it shares) from a paired device; applied under your policy.",
            discussion: "From a capture device: fetched now. From the desktop: staged until that device next pulls or syncs.")
        @OptionGroup var homeOptions: HomeOptions
        @Option(name: .long, help: "The device (ID, prefix or name); needed when there are several.") var from: String?
        @Argument(help: "Keys to fetch (default: all it shares).") var keys: [String] = []
        @Flag(name: .long, help: "Apply what arrives now even if the policy is ask (not if deny).") var accept = false
        @OptionGroup var transfer: TransferOptions

        func run() throws {
            let home = homeOptions.resolved
            switch try ConfigTransfer.target(home, from) {
            case .desktop(let query):
                try ConfigTransfer.exchange(home, query, .pull(keys.isEmpty ? nil : keys), accept: accept, transfer)
            case .device(let peer):
                try ConfigTransfer.refuseAcceptWhenStaging(accept, peer)
                try ConfigTransfer.stage(home, peer, [.pull], keys: keys.isEmpty ? nil : keys)
            }
        }
    }

    struct Sync: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sync",
            abstract: "Pull and push everything with a paired device: afterwards both hold the newest value of every key.")
        @OptionGroup var homeOptions: HomeOptions
        @Option(name: .long, help: "The device (ID, prefix or name); needed when there are several.") var with: String?
        @Flag(name: .long, help: "Apply what arrives now even if the policy is ask (not if deny).") var accept = false
        @OptionGroup var transfer: TransferOptions

        func run() throws {
            let home = homeOptions.resolved
            switch try ConfigTransfer.target(home, with) {
            case .desktop(let query):
                try ConfigTransfer.exchange(home, query, .sync, accept: accept, transfer)
            case .device(let peer):
                try ConfigTransfer.refuseAcceptWhenStaging(accept, peer)
                try ConfigTransfer.stage(home, peer, [.push, .pull], keys: nil)
            }
        }
    }
}

enum ConfigTransfer {
    enum Target {
        /// This installation is a capture device: dial that desktop (nil: the only one).
        case desktop(String?)
        /// This installation is the desktop: stage for that device.
        case device(Peer)
    }

    static func target(_ home: Home, _ query: String?) throws -> Target {
        if let query {
            let peer = try ConfigCLI.peer(home, query)
            return peer.role == .desktop ? .desktop(query) : .device(peer)
        }
        let peers: PeerStore
        do { peers = try PeerStore(home: home) } catch { throw CLIError(error) }
        if peers.all.contains(where: { $0.role == .desktop }) { return .desktop(nil) }
        let clients = peers.all.filter { $0.role == .client }
        guard !clients.isEmpty else {
            throw CLIError("this installation is not paired with any device",
                           hint: "pair first: `speakbridge pair` on the desktop, `speakbridge join CODE` on the other device")
        }
        guard clients.count == 1 else {
            throw CLIError("paired with \(clients.count) devices; say which one", hint: "name it (see `speakbridge devices`)")
        }
        return .device(clients[0])
    }

    static func refuseAcceptWhenStaging(_ accept: Bool, _ peer: Peer) throws {
        guard !accept else {
            throw CLIError("--accept applies to what arrives during the command, but on the desktop it only stages",
                           hint: "let changes from it apply at once with `speakbridge config policy accept --device \(peer.id)`")
        }
    }

    /// Desktop side: records the request for `peer`, merged with what is already staged for it.
    static func stage(_ home: Home, _ peer: Peer, _ kinds: [StagedOutbox.Item.Kind], keys: [String]?) throws {
        let store = try ConfigCLI.store(home)
        try ConfigCLI.run {
            try store.update { tx throws(ConfigError) in
                // The same check a device makes before it pushes (a pull may name keys not set here).
                if kinds.contains(.push) {
                    try ConfigView(tx, peer: peer.id).checkPush(keys)
                } else {
                    for key in keys ?? [] { try ConfigKey.validate(key) }
                }
                for kind in kinds {
                    tx.outbox.stage(device: peer.id, kind: kind, keys: keys, staged: Int64(Date().timeIntervalSince1970)) {
                        "s-" + Hex.encode((0..<8).map { _ in UInt8.random(in: 0...255) })
                    }
                }
            }
        }
        let what = kinds.map { $0 == .push ? "push" : "pull" }.joined(separator: " and ")
        Console.info("\(what) staged for \"\(PeerText.escape(peer.name, limit: 64))\" (\(peer.id)): \(keys.map { "\($0.count) key(s)" } ?? "all keys")")
        Console.info("it happens when that device runs `speakbridge config pull` or `speakbridge config sync`")
        if !daemonRuns(home, timeout: 2) {
            Console.info("hint: no daemon runs for this home; start `speakbridge serve` so the device can connect")
        }
    }

    /// A device revoked without a running daemon: drop what was staged for it and the changes it offered that
    /// wait for consent, with their secrets (the daemon does this itself through `PeerConfigHandler.deviceRevoked`).
    /// Never fails the revoke: a config that cannot be read only earns a warning.
    static func forgetDevice(_ home: Home, _ device: DeviceID) {
        do {
            let identity = try Identity.loadOrCreate(home)
            let dropped = try ConfigStore(home: home, device: identity.deviceID).forget(device: device)
            if dropped.staged > 0 { Console.info("dropped \(dropped.staged) config push/pull item(s) staged for it") }
            if dropped.pending > 0 { Console.info("dropped \(dropped.pending) pending config change(s) from it") }
        } catch let error as ConfigError {
            Console.warning("cannot drop the config staged for it or pending from it: \(error.message)")
        } catch {
            Console.warning("cannot drop the config staged for it or pending from it: \(error)")
        }
    }

    /// Capture-device side: one session with the desktop.
    static func exchange(_ home: Home, _ query: String?, _ operation: ConfigExchangeOptions.Operation, accept: Bool,
                         _ transfer: Config.TransferOptions) throws {
        let report: ConfigExchangeReport
        do {
            let exchange = try ConfigExchange(options: ConfigExchangeOptions(
                home: home, desktop: query, operation: operation, acceptIncoming: accept, timeout: transfer.timeout,
                extraCandidates: try transfer.candidates()))
            report = try exchange.run()
        } catch let error as ClientError {
            throw CLIError(error.message, hint: error.hint, exitCode: error.exitCode)
        }
        let desk = "\"\(PeerText.escape(report.desktopName, limit: 64))\""
        for r in report.delivered {
            switch r.status {
            case .denied:
                Console.warning("\(desk) denies config from this device (its policy): nothing was stored there")
            default:
                var parts = ["applied \(r.appliedCount)"]
                if r.pendingCount > 0 { parts.append("\(r.pendingCount) held for consent there (`speakbridge config pending` on it)") }
                if r.unchangedCount > 0 { parts.append("\(r.unchangedCount) unchanged (it has them or newer)") }
                if r.skippedCount > 0 { parts.append("\(r.skippedCount) skipped (local-only there)") }
                Console.info("sent to \(desk): " + parts.joined(separator: ", "))
            }
        }
        var waiting = Swift.Set<String>()
        for (origin, r) in report.received {
            let from = origin == .staged ? "pushed by \(desk)" : "from \(desk)"
            switch r.status {
            case .denied:
                Console.info("\(from): refused (this device's policy is deny)")
            default:
                var parts = ["applied \(r.applied.count)" + (r.applied.isEmpty ? "" : " (\(r.applied.joined(separator: ", ")))")]
                if !r.pending.isEmpty { parts.append("\(r.pending.count) waiting for your consent") }
                if !r.unchanged.isEmpty { parts.append("\(r.unchanged.count) unchanged") }
                if !r.skipped.isEmpty { parts.append("\(r.skipped.count) skipped (local-only here)") }
                Console.info("\(from): " + parts.joined(separator: ", "))
                waiting.formUnion(r.pending)
            }
        }
        if !waiting.isEmpty {
            Console.info("review with `speakbridge config pending`, then `speakbridge config accept` (or `reject`)")
        }
        if report.withheld > 0 {
            let me = (try? Identity.loadOrCreate(home).deviceID.description) ?? "THIS-DEVICE"
            Console.info("\(desk) withheld \(report.withheld) secret(s): it shares secrets only on a decision made there")
            Console.info("hint: on the desktop, `speakbridge config push --to \(me) KEY` sends one, or `speakbridge config share all` lets paired devices pull them")
        }
        guard report.errors.isEmpty else {
            for e in report.errors { Console.error(e) }
            throw CLIError("the exchange with \(desk) did not fully succeed; nothing was half-applied",
                           hint: "see the errors above")
        }
    }
}
