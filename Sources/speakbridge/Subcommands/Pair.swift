import ArgumentParser
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

struct Pair: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a one-time pairing code (QR and text) from the running daemon.")

    @OptionGroup var homeOptions: HomeOptions

    @Flag(name: .long, help: "Print {\"code\":…,\"expires\":…,\"id\":…} instead of the QR.")
    var json = false

    @Flag(name: .long, help: ArgumentHelp(
        "Put only the first address into the code: a shorter code, whose QR fits a small terminal.",
        discussion: "The phone then dials that address (and finds the desktop over mDNS if it moved)."))
    var compact = false

    func run() throws {
        let home = homeOptions.resolved
        let reply: JSONValue
        do {
            reply = try ControlClient.request(home: home, .object([("cmd", .string("pair"))]))
        } catch {
            throw CLIError(error)
        }
        guard reply["ok"]?.boolValue == true, let issued = reply["code"]?.stringValue else {
            throw CLIError(reply["error"]?.stringValue ?? "the daemon did not issue a code", hint: reply["hint"]?.stringValue)
        }
        let code = compact ? (PairingDisplay.compacted(issued) ?? issued) : issued
        if json {
            Console.out(String(decoding: JSONValue.object([
                ("code", .string(code)),
                ("expires", reply["expires"] ?? .null),
                ("id", reply["id"] ?? .null),
            ]).encoded(), as: UTF8.self))
            return
        }
        let lifetime = reply["lifetime"]?.int64Value ?? Int64(SpeakBridgeProtocol.pairingCodeLifetime)
        let command = "speakbridge pair" + (homeOptions.home.map { " --home '\($0)'" } ?? "")
        PairingDisplay.show(code: code, lifetime: lifetime, toStderr: false, pairCommand: command)
    }
}
