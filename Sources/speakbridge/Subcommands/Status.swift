import ArgumentParser
import FoundationEssentials
import SpeakBridgeControl
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the running daemon: address and port, sinks and their health, devices, sessions, mDNS.")

    @OptionGroup var homeOptions: HomeOptions

    @Flag(name: .long, help: "Print the full status as JSON.")
    var json = false

    func run() throws {
        let reply: StatusReply
        do throws(ControlError) {
            reply = try ControlClient.ask(.status, home: homeOptions.resolved)
        } catch {
            throw CLIError(error.message, hint: error.hint)
        }
        if json {
            Console.out(String(decoding: reply.json.encoded(), as: UTF8.self))
            return
        }
        var lines = ["desktop \(reply.id) (\(reply.name))", "listening on \(reply.host):\(reply.port)"]
        if !reply.addresses.isEmpty {
            lines.append("addresses: \(reply.addresses.joined(separator: ", "))")
        }
        for sink in reply.sinks {
            lines.append("sink \(sink.label): \(sink.problem.map { "waiting: \($0)" } ?? "ok")\(sink.queued > 0 ? " (\(sink.queued) queued)" : "")"
                         + (sink.method.map { "; \($0)" } ?? ""))
        }
        lines.append("mdns: \(reply.mdns.state)")
        lines += WebStatusLines.lines(reply.web)
        lines.append("paired devices: \(reply.devices.count), connections: \(reply.authenticated)")
        // Devices by name with their ID (names need not be unique); a device that is no longer paired by ID only.
        func who(_ id: String, _ name: String) -> String {
            name.isEmpty ? id : "\"\(name)\" (\(id))"
        }
        for device in reply.connected {
            lines.append("connected: \(who(device.device, device.name))")
        }
        for session in reply.sessions {
            lines.append("session \(session.session) of \(who(session.device, session.name)): delivered \(session.delivered)")
        }
        lines.append("connections closed: \(reply.closedNormally) normally, \(reply.closedOnError) on an error, "
                     + "\(reply.rejected) rejected; failed pairing attempts: \(reply.pairingFailures)")
        // Device and session names, sink problems: each line escaped, so none can span or forge lines.
        Console.out(lines.map(PeerText.escape).joined(separator: "\n"))
    }
}
