#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeClient
import SpeakBridgeSupport

/// `speakbridge send`'s usual invocations read without swift-argument-parser, so that a streaming `send` reaches
/// its desktop sooner: the parser costs about 12 M instructions (1.6 ms, a sixth of `send`'s first-line budget),
/// most of it instantiating the property wrappers' generic types and scanning every protocol conformance of the
/// binary for each (and parsing two more commands to look for `--generate-completion-script`).
///
/// It reads only what it reads exactly as the parser would, and gives up (nil) on anything else: help, a mistake,
/// an unknown or repeated option, `--name=value`, a missing value, a value that is empty or starts with `-`, a
/// number that is not one, `--verbose` with `--quiet`, an invalid `--timeout`. Then the full parser runs as
/// always, with its messages. `QuickSendTests` checks both agree on every vector, and that `Send` declares
/// exactly the options named here.
struct QuickSend: Equatable {
    var home: String?
    var verbose = false
    var quiet = false
    var texts: [String] = []
    var to: String?
    var timeout: Double?
    var stillWaitingInterval: Double = 30
    var defaultTimeout: Double = SendOptions.defaultTimeout
    var addresses: [String] = []

    /// Options followed by a value; the others are flags. (Arrays, not sets: a first `Set<String>` costs a
    /// quarter of a million instructions of metadata and hashing set-up, more than this whole reading.)
    static let valued: [String] = [
        "--home", "--text", "--to", "--timeout", "--still-waiting-interval", "--default-timeout", "--address",
    ]
    static let flags: [String] = ["--verbose", "--quiet"]
    /// May be given more than once (the parser collects them); every other option at most once.
    static let repeatable: [String] = ["--text", "--address"]

    /// - Parameter arguments: the command line without the program name.
    init?(_ arguments: [String]) {
        guard arguments.first == "send" else { return nil }
        var seen: [String] = []
        var i = 1
        while i < arguments.count {
            let name = arguments[i]
            if !Self.repeatable.contains(name) {
                guard !seen.contains(name) else { return nil }
                seen.append(name)
            }
            if Self.flags.contains(name) {
                if name == "--verbose" { verbose = true } else { quiet = true }
                i += 1
                continue
            }
            guard Self.valued.contains(name), i + 1 < arguments.count else { return nil }
            let value = arguments[i + 1]
            guard let first = value.utf8.first, first != UInt8(ascii: "-") else { return nil }
            i += 2
            switch name {
            case "--home": home = value
            case "--text": texts.append(value)
            case "--to": to = value
            case "--address": addresses.append(value)
            case "--timeout":
                guard let seconds = Double(value), seconds >= 0, seconds.isFinite else { return nil }
                timeout = seconds
            case "--still-waiting-interval":
                guard let seconds = Double(value) else { return nil }
                stillWaitingInterval = seconds
            case "--default-timeout":
                guard let seconds = Double(value) else { return nil }
                defaultTimeout = seconds
            default:
                return nil
            }
        }
        guard !(verbose && quiet) else { return nil }
    }

    var verbosity: Console.Verbosity { verbose ? .verbose : quiet ? .quiet : .normal }

    /// What `Send.run` does with the same options.
    func run() throws {
        try Send.send(home: HomeOptions.resolve(home), to: to, texts: texts, timeout: timeout, addresses: addresses,
                      stillWaitingInterval: stillWaitingInterval, defaultTimeout: defaultTimeout)
    }
}
