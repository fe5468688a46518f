import ArgumentParser
import Foundation
import SpeakBridgeClient
import SpeakBridgeStore

struct Send: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send text to the paired desktop: each stdin line (or each --text) is one chunk.",
        discussion: """
        Exits 0 once the desktop acknowledged every chunk. Chunks are journaled before they are sent; \
        if the desktop is unreachable they wait in the outbox and go out with the next `send`.
        """)

    @OptionGroup var homeOptions: HomeOptions

    @Option(name: .long, help: "Send this text as one chunk instead of reading stdin (repeatable).")
    var text: [String] = []

    @Option(name: .long, help: "Which paired desktop (ID, ID prefix or name); needed when paired with several.",
            completion: Completions.devices)
    var to: String?

    @Option(name: .long, help: "Give up after SECONDS without every chunk acknowledged (0 = keep trying).")
    var timeout: Double = 0

    @OptionGroup var addressOptions: AddressOptions

    func run() throws {
        let extra = try addressOptions.candidates()
        let sender: Sender
        do {
            sender = try Sender(options: SendOptions(
                home: homeOptions.resolved, desktop: to, source: text.isEmpty ? .stdin : .texts(text),
                timeout: timeout, extraCandidates: extra))
        } catch {
            throw CLIError(error.message, hint: error.hint, exitCode: error.exitCode)
        }
        let code = sender.run()
        if code != 0 { Foundation.exit(code) }
    }
}
