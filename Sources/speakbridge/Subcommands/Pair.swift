import ArgumentParser
import SpeakBridgeControl
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

struct Pair: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair",
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
        let reply: PairReply
        do throws(ControlError) {
            reply = try ControlClient.ask(.pair(web: web), home: home)
        } catch {
            throw CLIError(error.message, hint: error.hint)
        }
        if web {
            guard let page = reply.web else {
                throw CLIError("the daemon did not give a web address", hint: "update the daemon and restart it")
            }
            if json {
                Console.out(String(decoding: JSONValue.object([
                    ("url", .string(page.url)), ("code", .string(page.code)), ("expires", .integer(reply.expires)),
                    ("id", .string(reply.id)), ("fingerprint", .string(page.fingerprint)),
                ]).encoded(), as: UTF8.self))
                return
            }
            PairingDisplay.showWeb(url: page.url, qrText: WebPairing.qrText(page.url), lifetime: reply.lifetime,
                                   fingerprint: page.fingerprint)
            return
        }
        let issued = reply.code
        let code = compact ? (PairingDisplay.compacted(issued) ?? issued) : issued
        if json {
            Console.out(String(decoding: JSONValue.object([
                ("code", .string(code)),
                ("expires", .integer(reply.expires)),
                ("id", .string(reply.id)),
            ]).encoded(), as: UTF8.self))
            return
        }
        let lifetime = reply.lifetime
        let command = "speakbridge pair" + (homeOptions.home.map { " --home '\($0)'" } ?? "")
        PairingDisplay.show(code: code, lifetime: lifetime, toStderr: false, pairCommand: command)
    }
}
