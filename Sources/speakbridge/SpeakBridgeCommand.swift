import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import SpeakBridgeStore
import SpeakBridgeSupport

/// `speakbridge`: the root command. Subcommands live in `Subcommands/`, one file each; this target only
/// parses arguments and wires the library targets together.
///
/// Every command names itself (`commandName:`): otherwise the parser derives each name with
/// `String(describing:)` on the command's type, a dynamic cast that scans every protocol conformance in the
/// binary — 62 % of `speakbridge --version`'s instructions when the names were derived.
@main
struct SpeakBridgeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "speakbridge",
        abstract: "Dictation from a phone (or any program) to this Linux desktop: paired once, encrypted, exactly once.",
        version: "0.1.0",
        subcommands: [Serve.self, Pair.self, Devices.self, Status.self, Join.self, Send.self, OutboxCommand.self, Discover.self,
                      Config.self, Sessions.self, TypeCommand.self])

    /// Errors a user can cause are printed as `speakbridge: error: …` plus a hint, never as a crash.
    static func main() {
        Trace.mark("main")
        signal(SIGPIPE, SIG_IGN)
        do {
            // `send` as usually called: without the argument parser (`QuickSend`; anything else goes to the parser).
            if let quick = QuickSend(Array(CommandLine.arguments.dropFirst())) {
                Trace.mark("parsed")
                Console.bootstrap(quick.verbosity)
                try quick.run()
                return
            }
            var command = try parseAsRoot()
            Trace.mark("parsed")
            Console.bootstrap(HomeOptions.found(in: command)?.verbosity ?? .normal)
            try command.run()
        } catch let error as CLIError {
            Console.error(error.message, hint: error.hint)
            Glibc.exit(error.exitCode)
        } catch {
            exit(withError: error)
        }
    }
}

/// Options every subcommand takes (so `--verbose`/`--quiet` are global: every leaf command has this group).
struct HomeOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Keep all of this installation's files under DIR (default: XDG directories; also SPEAKBRIDGE_HOME).",
        valueName: "DIR"), completion: .directory)
    var home: String?

    @Flag(name: .long, help: "Also log debug lines (connections, sink writes).")
    var verbose = false

    @Flag(name: .long, help: "Log warnings and errors only.")
    var quiet = false

    var resolved: Home { Self.resolve(home) }

    /// `Home.resolve` with each variable it reads taken from getenv: `ProcessInfo.processInfo.environment` copies
    /// the whole environment into a dictionary first (about 0.7 M instructions, 0.2 ms, at every start), and even a
    /// dictionary of the five variables costs 0.3 M (the first `[String: String]` of the process).
    static func resolve(_ home: String?) -> Home {
        Home.resolve(override: home, variable: { name in getenv(name).map { String(cString: $0) } })
    }

    var verbosity: Console.Verbosity { verbose ? .verbose : quiet ? .quiet : .normal }

    func validate() throws {
        if verbose && quiet { throw ValidationError("--verbose and --quiet cannot be used together") }
    }

    /// The parsed group inside `command` (each leaf subcommand holds one as an `@OptionGroup` property).
    static func found(in command: ParsableCommand) -> HomeOptions? {
        Mirror(reflecting: command).children.lazy
            .compactMap { ($0.value as? OptionGroup<HomeOptions>)?.wrappedValue }.first
    }
}

struct CLIError: Error {
    var message: String
    var hint: String?
    var exitCode: Int32 = 1

    init(_ message: String, hint: String? = nil, exitCode: Int32 = 1) {
        self.message = message
        self.hint = hint
        self.exitCode = exitCode
    }
}

extension CLIError {
    init(_ error: StoreError) { self.init(error.message, hint: error.hint) }
}

/// Parses `HOST:PORT`, `[V6]:PORT` or `PORT`.
func parseHostPort(_ text: String, defaultHost: String) throws -> (String, Int) {
    var host = defaultHost
    var portText = text
    if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
        host = String(text[text.index(after: text.startIndex)..<close])
        portText = String(text[text.index(after: close)...].dropFirst())
    } else if let colon = text.lastIndex(of: ":") {
        host = String(text[..<colon])
        portText = String(text[text.index(after: colon)...])
    }
    guard let port = Int(portText), (0...65_535).contains(port) else {
        throw CLIError("invalid address \"\(text)\"", hint: "use HOST:PORT, e.g. 127.0.0.1:0 or 0.0.0.0:47810")
    }
    return (host.isEmpty ? defaultHost : host, port)
}
