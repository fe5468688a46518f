import ArgumentParser
import Foundation
import SpeakBridgeProtocol
import SpeakBridgeStore

struct Devices: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List paired devices, or revoke one.",
        subcommands: [List.self, Revoke.self],
        defaultSubcommand: List.self)

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List paired devices.")
        @OptionGroup var homeOptions: HomeOptions
        @Flag(name: .long, help: "Print JSON.") var json = false

        func run() throws {
            let home = homeOptions.resolved
            // Ask the daemon when it runs (it knows delivery progress); otherwise read the files.
            var devices: [JSONValue]
            if let reply = daemonReply(home, .object([("cmd", .string("devices"))])),
               let list = reply["devices"]?.arrayValue {
                devices = list
            } else {
                let peers: PeerStore
                do { peers = try PeerStore(home: home) } catch { throw CLIError(error) }
                devices = peers.all.map(deviceJSON)
            }
            if json {
                Console.out(String(decoding: JSONValue.array(devices).encoded(), as: UTF8.self))
                return
            }
            if devices.isEmpty {
                Console.info("no paired devices; pair one with `speakbridge pair` (desktop) and `speakbridge join` (capture device)")
                return
            }
            let formatter = ISO8601DateFormatter()
            for d in devices {
                let seen = d["lastSeen"]?.int64Value.map { formatter.string(from: Date(timeIntervalSince1970: Double($0))) } ?? "never"
                var line = "\(d["id"]?.stringValue ?? "?")  \(d["role"]?.stringValue ?? "?")  \"\(d["name"]?.stringValue ?? "")\"  last seen \(seen)"
                if d["kind"]?.stringValue == "browser" {
                    line += "  browser" + (d["agent"]?.stringValue.map { " (\($0))" } ?? "")
                }
                if case .object(let sessions)? = d["delivered"], !sessions.isEmpty {
                    line += "  delivered " + sessions.map { "\($0.0):\($0.1.int64Value ?? 0)" }.joined(separator: " ")
                }
                // Names and session IDs come from peers: one escaped line per device, never a raw control.
                Console.out(PeerText.escape(line))
            }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Forget a paired device: it can no longer connect (live connections are closed).")
        @OptionGroup var homeOptions: HomeOptions
        @Argument(help: "Device ID (or an unambiguous prefix, or its name).", completion: Completions.devices) var id: String

        func run() throws {
            let home = homeOptions.resolved
            if let reply = daemonReply(home, .object([("cmd", .string("revoke")), ("id", .string(id))])) {
                guard reply["ok"]?.boolValue == true else {
                    if let matches = reply["matches"]?.arrayValue { listMatches(matches) }
                    throw CLIError(reply["error"]?.stringValue ?? "revoke failed", hint: reply["hint"]?.stringValue)
                }
                Console.info("revoked \"\(reply["name"]?.stringValue ?? "")\" (\(reply["id"]?.stringValue ?? id))")
                return
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
            } catch let error as StoreError {
                throw CLIError(error)
            }
        }
    }
}

/// A device as `devices --json` shows it (from the files).
func deviceJSON(_ p: Peer) -> JSONValue {
    var m: [(String, JSONValue)] = [("id", .string(p.id.description)), ("name", .string(p.name)),
                                    ("role", .string(p.role.rawValue)), ("kind", .string(p.kind.rawValue)),
                                    ("pairedAt", .integer(Int64(p.pairedAt.timeIntervalSince1970)))]
    if let seen = p.lastSeen { m.append(("lastSeen", .integer(Int64(seen.timeIntervalSince1970)))) }
    if let agent = p.agent { m.append(("agent", .string(agent))) }
    if !p.addresses.isEmpty { m.append(("addresses", .array(p.addresses.map { .string($0) }))) }
    return .object(m)
}

/// Several devices match what the user typed (two named "vm"): the error that asks for the ID.
func ambiguousDevices(_ query: String, _ matches: [Peer], usage: String = "speakbridge devices revoke ID") -> CLIError {
    CLIError("\(matches.count) paired devices match \"\(query)\"", hint: "say which one by its ID: `\(usage)`")
}

/// Lists candidate devices on stderr, one escaped line each: ID, name, role, last seen.
func listMatches(_ devices: [JSONValue]) {
    let formatter = ISO8601DateFormatter()
    for d in devices {
        let seen = d["lastSeen"]?.int64Value.map { formatter.string(from: Date(timeIntervalSince1970: Double($0))) } ?? "never"
        Console.info("  \(d["id"]?.stringValue ?? "?")  \(d["role"]?.stringValue ?? "?")  \"\(d["name"]?.stringValue ?? "")\"  last seen \(seen)")
    }
}

/// The daemon's answer, or nil when it cannot be asked: then the caller works on the files. "No daemon runs" is
/// normal; any other failure (a control socket that is not ours, in a directory that is not ours) is said loudly
/// first, so it never passes for "no daemon", and the request never reaches whoever is behind that socket.
func daemonReply(_ home: Home, _ request: JSONValue, timeout: Int = 10) -> JSONValue? {
    do throws(StoreError) {
        return try ControlClient.request(home: home, request, timeout: timeout)
    } catch where error.noDaemon {
        return nil
    } catch {
        Console.warning("not asking the daemon: \(error.message); working on the files instead")
        if let hint = error.hint { Console.info("hint: " + hint) }
        return nil
    }
}
