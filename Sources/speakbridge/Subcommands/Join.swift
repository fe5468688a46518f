import ArgumentParser
import Foundation
import SpeakBridgeClient
import SpeakBridgeStore

struct Join: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pair this installation with a desktop, using the code it showed (`speakbridge pair`).")

    @OptionGroup var homeOptions: HomeOptions

    @Argument(help: "The pairing code (SB1:…).") var code: String

    @Option(name: .long, help: "A name for this device, shown on the desktop.")
    var name: String = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "capture"

    @OptionGroup var addressOptions: AddressOptions

    func run() throws {
        let extra = try addressOptions.candidates()
        do {
            let peer = try Joiner.join(home: homeOptions.resolved, code: code, name: name, extraCandidates: extra)
            Console.info("paired with \"\(peer.name)\" (\(peer.id)); send text with `speakbridge send`")
        } catch {
            throw CLIError(error.message, hint: error.hint, exitCode: error.exitCode)
        }
    }
}
