import ArgumentParser
import Foundation
import SpeakBridgeProtocol
import SpeakBridgeStore

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the running daemon: address and port, sinks and their health, devices, sessions, mDNS.")

    @OptionGroup var homeOptions: HomeOptions

    @Flag(name: .long, help: "Print the full status as JSON.")
    var json = false

    func run() throws {
        let reply: JSONValue
        do {
            reply = try ControlClient.request(home: homeOptions.resolved, .object([("cmd", .string("status"))]))
        } catch {
            throw CLIError(error)
        }
        if json {
            Console.out(String(decoding: reply.encoded(), as: UTF8.self))
            return
        }
        func s(_ key: String) -> String {
            switch reply[key] {
            case .string(let v)?: return v
            case .integer(let v)?: return String(v)
            default: return "?"
            }
        }
        var lines = ["desktop \(s("id")) (\(s("name")))", "listening on \(s("host")):\(s("port"))"]
        if let addrs = reply["addresses"]?.arrayValue?.compactMap(\.stringValue), !addrs.isEmpty {
            lines.append("addresses: \(addrs.joined(separator: ", "))")
        }
        for sink in reply["sinks"]?.arrayValue ?? [] {
            let label = sink["sink"]?.stringValue ?? "?"
            let problem = sink["problem"]?.stringValue
            let queued = sink["queued"]?.int64Value ?? 0
            lines.append("sink \(label): \(problem.map { "waiting: \($0)" } ?? "ok")\(queued > 0 ? " (\(queued) queued)" : "")")
        }
        lines.append("mdns: \(reply["mdns"]?["state"]?.stringValue ?? "?")")
        lines += WebStatusLines.lines(reply["web"])
        lines.append("paired devices: \(reply["devices"]?.arrayValue?.count ?? 0), connections: \(s("authenticated"))")
        // Devices by name with their ID (names need not be unique); a device that is no longer paired by ID only.
        func who(_ item: JSONValue) -> String {
            let id = item["device"]?.stringValue ?? "?"
            let name = item["name"]?.stringValue ?? ""
            return name.isEmpty ? id : "\"\(name)\" (\(id))"
        }
        for device in reply["connected"]?.arrayValue ?? [] {
            lines.append("connected: \(who(device))")
        }
        for session in reply["sessions"]?.arrayValue ?? [] {
            lines.append("session \(session["session"]?.stringValue ?? "?") of \(who(session)): delivered \(session["delivered"]?.int64Value ?? 0)")
        }
        if reply["closedNormally"] != nil {
            lines.append("connections closed: \(s("closedNormally")) normally, \(s("closedOnError")) on an error, "
                         + "\(s("rejected")) rejected; failed pairing attempts: \(s("pairingFailures"))")
        }
        // Device and session names, sink problems: each line escaped, so none can span or forge lines.
        Console.out(lines.map(PeerText.escape).joined(separator: "\n"))
    }
}
