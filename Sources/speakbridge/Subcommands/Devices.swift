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
            if let reply = try? ControlClient.request(home: home, .object([("cmd", .string("devices"))])),
               let list = reply["devices"]?.arrayValue {
                devices = list
            } else {
                let peers: PeerStore
                do { peers = try PeerStore(home: home) } catch { throw CLIError(error) }
                devices = peers.all.map { p in
                    var m: [(String, JSONValue)] = [("id", .string(p.id.description)), ("name", .string(p.name)),
                                                    ("role", .string(p.role.rawValue)),
                                                    ("pairedAt", .integer(Int64(p.pairedAt.timeIntervalSince1970)))]
                    if let seen = p.lastSeen { m.append(("lastSeen", .integer(Int64(seen.timeIntervalSince1970)))) }
                    if !p.addresses.isEmpty { m.append(("addresses", .array(p.addresses.map { .string($0) }))) }
                    return .object(m)
                }
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
        @Argument(help: "Device ID (or an unambiguous prefix, or its name).") var id: String

        func run() throws {
            let home = homeOptions.resolved
            if let reply = try? ControlClient.request(home: home, .object([("cmd", .string("revoke")), ("id", .string(id))])) {
                guard reply["ok"]?.boolValue == true else {
                    throw CLIError(reply["error"]?.stringValue ?? "revoke failed", hint: reply["hint"]?.stringValue)
                }
                Console.info("revoked \(reply["id"]?.stringValue ?? id)")
                return
            }
            do {
                let peers = try PeerStore(home: home)
                guard let peer = peers.find(id) else {
                    throw CLIError("no paired device matches \"\(id)\"", hint: "list them with `speakbridge devices`")
                }
                try peers.remove(id: peer.id)
                Console.info("revoked \(peer.id)")
            } catch let error as StoreError {
                throw CLIError(error)
            }
        }
    }
}
