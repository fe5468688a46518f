import ArgumentParser
import FoundationEssentials
import SpeakBridgeControl
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

struct Devices: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List paired devices, or revoke one.",
        subcommands: [List.self, Revoke.self],
        defaultSubcommand: List.self)

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List paired devices.")
        @OptionGroup var homeOptions: HomeOptions
        @Flag(name: .long, help: "Print JSON.") var json = false

        func run() throws {
            let home = homeOptions.resolved
            // Ask the daemon when it runs (it knows delivery progress); otherwise read the files.
            var devices: [DeviceEntry]
            if case .success(let reply)? = daemonReply(home, .devices, as: DevicesReply.self) {
                devices = reply.devices
            } else {
                let peers: PeerStore
                do { peers = try PeerStore(home: home) } catch { throw CLIError(error) }
                devices = peers.all.map(deviceEntry)
            }
            if json {
                Console.out(String(decoding: JSONValue.array(devices.map(\.json)).encoded(), as: UTF8.self))
                return
            }
            if devices.isEmpty {
                Console.info("no paired devices; pair one with `speakbridge pair` (desktop) and `speakbridge join` (capture device)")
                return
            }
            let formatter = Date.ISO8601FormatStyle()
            for d in devices {
                let seen = d.lastSeen.map { formatter.format(Date(timeIntervalSince1970: Double($0))) } ?? "never"
                var line = "\(d.id)  \(d.role)  \"\(d.name)\"  last seen \(seen)"
                if d.kind == DeviceKind.browser.rawValue {
                    line += "  browser" + (d.agent.map { " (\($0))" } ?? "")
                }
                if let sessions = d.delivered, !sessions.isEmpty {
                    line += "  delivered " + sessions.map { "\($0.session):\($0.seq)" }.joined(separator: " ")
                }
                // Names and session IDs come from peers: one escaped line per device, never a raw control.
                Console.out(PeerText.escape(line))
            }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke",
            abstract: "Forget a paired device: it can no longer connect (live connections are closed).")
        @OptionGroup var homeOptions: HomeOptions
        @Argument(help: "Device ID (or an unambiguous prefix, or its name).", completion: Completions.devices) var id: String

        func run() throws {
            let home = homeOptions.resolved
            switch daemonReply(home, .revoke(id), as: RevokeReply.self) {
            case .success(let reply)?:
                Console.info("revoked \"\(reply.name)\" (\(reply.id.isEmpty ? id : reply.id))")
                return
            case .failure(let refusal)?:
                listMatches(refusal.matches)
                throw CLIError(refusal.error, hint: refusal.hint)
            case nil:
                break
            }
            do {
                let peers = try PeerStore(home: home)
                let matches = peers.matches(id)
                if matches.count > 1 {
                    listMatches(matches.map(deviceJSON))
                    throw ambiguousDevices(id, matches)
                }
                guard let peer = matches.first else {
                    throw CLIError("no paired device matches \"\(id)\"", hint: "list them with `speakbridge devices`")
                }
                try peers.remove(id: peer.id)
                Console.info("revoked \"\(peer.name)\" (\(peer.id))")
                ConfigTransfer.forgetDevice(home, peer.id)
            } catch let error as StoreError {
                throw CLIError(error)
            }
        }
    }
}

/// A device as `devices --json` shows it (from the files).
func deviceEntry(_ p: Peer) -> DeviceEntry {
    DeviceEntry(id: p.id.description, name: p.name, role: p.role.rawValue, pairedAt: Int64(p.pairedAt.timeIntervalSince1970),
                lastSeen: p.lastSeen.map { Int64($0.timeIntervalSince1970) }, addresses: p.addresses,
                kind: p.kind.rawValue, agent: p.agent)
}

/// Several devices match what the user typed (two named "vm"): the error that asks for the ID.
func ambiguousDevices(_ query: String, _ matches: [Peer], usage: String = "speakbridge devices revoke ID") -> CLIError {
    CLIError("\(matches.count) paired devices match \"\(query)\"", hint: "say which one by its ID: `\(usage)`")
}

/// Lists candidate devices on stderr, one escaped line each: ID, name, role, last seen.
/// The same, from devices as JSON (`deviceJSON`).
func listMatches(_ devices: [JSONValue]) { listMatches(devices.compactMap(DeviceSummary.init(json:))) }

/// A device from the files, as JSON.
func deviceJSON(_ p: Peer) -> JSONValue { deviceEntry(p).json }

func listMatches(_ devices: [DeviceSummary]) {
    let formatter = Date.ISO8601FormatStyle()
    for d in devices {
        let seen = d.lastSeen.map { formatter.format(Date(timeIntervalSince1970: Double($0))) } ?? "never"
        Console.info("  \(d.id)  \(d.role)  \"\(d.name)\"  last seen \(seen)")
    }
}

/// The daemon's answer, or nil when it cannot be asked: then the caller works on the files. "No daemon runs" is
/// normal; any other failure (a control socket that is not ours, in a directory that is not ours) is said loudly
/// first, so it never passes for "no daemon", and the request never reaches whoever is behind that socket.
/// `.failure`: the daemon answered with a refusal.
func daemonReply<Reply: ControlReplyDecodable>(_ home: Home, _ request: ControlRequest, timeout: Int = 10,
                                               as: Reply.Type) -> Result<Reply, ControlFailure>? {
    do throws(ControlError) {
        return .success(try ControlClient.ask(request, home: home, timeout: timeout, as: Reply.self))
    } catch {
        switch error {
        case .refused(let refusal):
            return .failure(refusal)
        case .transport(let e) where e.noDaemon:
            return nil
        case .transport(let e):
            Console.warning("not asking the daemon: \(e.message); working on the files instead")
            if let hint = e.hint { Console.info("hint: " + hint) }
            return nil
        }
    }
}

/// Whether a daemon answers for `home` (a status request, `timeout` seconds at most).
func daemonRuns(_ home: Home, timeout: Int = 10) -> Bool {
    daemonReply(home, .status, timeout: timeout, as: StatusReply.self) != nil
}
