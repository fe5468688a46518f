import ArgumentParser
import SpeakBridgeProtocol
import SpeakBridgeQR
import SpeakBridgeStore

struct Pair: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a one-time pairing code (QR and text) from the running daemon.")

    @OptionGroup var homeOptions: HomeOptions

    @Flag(name: .long, help: "Print {\"code\":…,\"expires\":…,\"id\":…} instead of the QR.")
    var json = false

    func run() throws {
        let home = homeOptions.resolved
        let reply: JSONValue
        do {
            reply = try ControlClient.request(home: home, .object([("cmd", .string("pair"))]))
        } catch {
            throw CLIError(error)
        }
        guard reply["ok"]?.boolValue == true, let code = reply["code"]?.stringValue else {
            throw CLIError(reply["error"]?.stringValue ?? "the daemon did not issue a code", hint: reply["hint"]?.stringValue)
        }
        if json {
            Console.out(String(decoding: JSONValue.object([
                ("code", .string(code)),
                ("expires", reply["expires"] ?? .null),
                ("id", reply["id"] ?? .null),
            ]).encoded(), as: UTF8.self))
            return
        }
        if let qr = try? TerminalQR.render(code) { Console.out(qr) }
        Console.out(code)
        let lifetime = reply["lifetime"]?.int64Value ?? Int64(SpeakBridgeProtocol.pairingCodeLifetime)
        Console.info("valid for \(lifetime) s, single use; on the capture device run: speakbridge join '<code>'")
    }
}
