import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import SpeakBridgeClient
import SpeakBridgeStore

struct Send: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send text to the paired desktop: each stdin line (or each --text) is one chunk.",
        discussion: """
        Exits 0 once the desktop acknowledged every chunk. Chunks are journaled before they are sent; \
        if the desktop is unreachable they wait in the outbox (`speakbridge outbox`) and go out with the next `send`.

        On a terminal, a status line on stderr shows what is queued, what was delivered, and why it is waiting. \
        Otherwise plain lines, and `still waiting for the desktop` every 30 s while it is unreachable.

        Exit status: 0 every chunk acknowledged; 1 error; 75 timeout (the chunks stay in the outbox); \
        77 the desktop refused this device (revoked?): pair again with `speakbridge join CODE`; \
        74 lines were left unacknowledged in a journal that could not be synced to disk (a crash of this \
        machine could lose them; the next `send` sends them).
        """)

    @OptionGroup var homeOptions: HomeOptions

    @Option(name: .long, help: "Send this text as one chunk instead of reading stdin (repeatable).")
    var text: [String] = []

    @Option(name: .long, help: "Which paired desktop (ID, ID prefix or name); needed when paired with several.",
            completion: Completions.devices)
    var to: String?

    @Option(name: .long, help: ArgumentHelp(
        "Give up after SECONDS without every chunk acknowledged (0 = keep trying). Default: keep trying while stdin "
        + "is an open pipe or a terminal; 30 s once the input has ended (--text, a file, a closed pipe).",
        valueName: "SECONDS"))
    var timeout: Double?

    // For tests: seconds between "still waiting" lines off a terminal, and the default rule's timeout.
    @Option(name: .long, help: .hidden)
    var stillWaitingInterval: Double = 30
    @Option(name: .long, help: .hidden)
    var defaultTimeout: Double = SendOptions.defaultTimeout

    @OptionGroup var addressOptions: AddressOptions

    func validate() throws {
        if let timeout, !(timeout >= 0 && timeout.isFinite) {
            throw ValidationError("--timeout must be 0 (keep trying) or a positive number of seconds")
        }
    }

    func run() throws {
        try Self.send(home: homeOptions.resolved, to: to, texts: text, timeout: timeout,
                      addresses: addressOptions.address, stillWaitingInterval: stillWaitingInterval,
                      defaultTimeout: defaultTimeout)
    }

    /// The command itself, for `run` and for `QuickSend` (the same options read without the argument parser).
    static func send(home: Home, to: String?, texts: [String], timeout: Double?, addresses: [String],
                     stillWaitingInterval: Double, defaultTimeout: Double) throws {
        let extra = try AddressOptions.candidates(addresses)
        let sender: Sender
        do {
            sender = try Sender(options: SendOptions(
                home: home, desktop: to, source: texts.isEmpty ? .stdin : .texts(texts),
                timeout: timeout, extraCandidates: extra, stillWaitingInterval: stillWaitingInterval,
                endedInputTimeout: defaultTimeout))
        } catch {
            throw CLIError(error.message, hint: error.hint, exitCode: error.exitCode)
        }
        let code = sender.run()
        if code != 0 { Glibc.exit(code) }
    }
}
