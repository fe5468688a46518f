import ArgumentParser
import SpeakBridgeProtocol
import SpeakBridgeStore

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

    @Flag(name: .long, help: ArgumentHelp(
        "Show the QR of the desktop's web page instead (https://ADDRESS:PORT/#CODE): any phone's camera opens it, "
            + "and the browser pairs and dictates. With --json: {\"url\":…,\"code\":…,…}."))
    var web = false

    func run() throws {
        let home = homeOptions.resolved
        let reply: JSONValue
        do {
            var request: [(String, JSONValue)] = [("cmd", .string("pair"))]
            if web { request.append(("web", .bool(true))) }
            reply = try ControlClient.request(home: home, .object(request))
        } catch {
            throw CLIError(error)
        }
        guard reply["ok"]?.boolValue == true, let issued = reply["code"]?.stringValue else {
            throw CLIError(reply["error"]?.stringValue ?? "the daemon did not issue a code", hint: reply["hint"]?.stringValue)
        }
        if web {
            guard let url = reply["url"]?.stringValue else {
                throw CLIError("the daemon did not give a web address", hint: "update the daemon and restart it")
            }
            let lifetime = reply["lifetime"]?.int64Value ?? Int64(SpeakBridgeProtocol.pairingCodeLifetime)
            if json {
                Console.out(String(decoding: JSONValue.object([
                    ("url", .string(url)), ("code", reply["webCode"] ?? .string(issued)), ("expires", reply["expires"] ?? .null),
                    ("id", reply["id"] ?? .null), ("fingerprint", reply["fingerprint"] ?? .null),
                ]).encoded(), as: UTF8.self))
                return
            }
            PairingDisplay.showWeb(url: url, qrText: WebPairing.qrText(url), lifetime: lifetime,
                                   fingerprint: reply["fingerprint"]?.stringValue ?? "")
            return
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
