import ArgumentParser
import SpeakBridgeClient

/// `--address HOST:PORT` (repeatable): extra places for `join` and `send` to try.
struct AddressOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Also try this address (repeatable).", valueName: "HOST:PORT"))
    var address: [String] = []

    func candidates() throws -> [Candidate] { try Self.candidates(address) }

    static func candidates(_ addresses: [String]) throws -> [Candidate] {
        try addresses.map { text in
            let (host, port) = try parseHostPort(text, defaultHost: "127.0.0.1")
            return Candidate(host: host, port: port, source: "--address")
        }
    }
}
