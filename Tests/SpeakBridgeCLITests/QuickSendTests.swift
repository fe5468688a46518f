import ArgumentParser
import Testing
@testable import speakbridge

/// `QuickSend` reads `send`'s usual command lines without swift-argument-parser: wherever it reads one, it must read
/// it exactly as the parser does; everything else must go to the parser (nil), and `Send` must declare no option it
/// does not know.
@Suite("QuickSend: send's options without the argument parser, the same as with it", .serialized)  // the parser is not thread-safe
struct QuickSendTests {
    /// The full parser's reading, in QuickSend's terms.
    static func full(_ arguments: [String]) throws -> QuickSend? {
        guard let send = try SpeakBridgeCommand.parseAsRoot(arguments) as? Send else { return nil }
        var q = try #require(QuickSend(["send"]))
        q.home = send.homeOptions.home
        q.verbose = send.homeOptions.verbose
        q.quiet = send.homeOptions.quiet
        q.texts = send.text
        q.to = send.to
        q.timeout = send.timeout
        q.stillWaitingInterval = send.stillWaitingInterval
        q.defaultTimeout = send.defaultTimeout
        q.addresses = send.addressOptions.address
        return q
    }

    static let read: [[String]] = [
        ["send"],
        ["send", "--home", "/tmp/x"],
        ["send", "--home", "relative/dir", "--verbose"],
        ["send", "--quiet", "--to", "office"],
        ["send", "--text", "one", "--text", "two words", "--text", "a=b"],
        ["send", "--text", "help"],
        ["send", "--to", "MD0Q-2NHH"],
        ["send", "--timeout", "0"],
        ["send", "--timeout", "2.5", "--default-timeout", "1", "--still-waiting-interval", "0.3"],
        ["send", "--address", "127.0.0.1:47810", "--address", "[::1]:9", "--address", "7"],
        ["send", "--text", "é ✓ \u{1B}[31m", "--home", "/h", "--timeout", "1e1"],
    ]

    @Test("every vector it reads, it reads as the argument parser does", arguments: read)
    func sameAsTheParser(_ arguments: [String]) throws {
        let quick = try #require(QuickSend(arguments), "QuickSend gave up on \(arguments)")
        #expect(try Self.full(arguments) == quick)
    }

    static let leftToTheParser: [[String]] = [
        ["--version"], ["help", "send"], ["serve"], ["send", "--help"], ["send", "-h"], ["send", "help"],
        ["send", "--nope"], ["send", "extra"], ["send", "--home=/x"], ["send", "--text"], ["send", "--text", ""],
        ["send", "--text", "-5"], ["send", "--text", "--"], ["send", "--", "--text", "x"],
        ["send", "--to", "a", "--to", "b"], ["send", "--home", "/a", "--home", "/b"], ["send", "--verbose", "--verbose"],
        ["send", "--verbose", "--quiet"], ["send", "--timeout", "-1"], ["send", "--timeout", "soon"],
        ["send", "--timeout", "inf"], ["send", "--timeout", "nan"], ["send", "--default-timeout", "x"],
        ["send", "--generate-completion-script", "bash"], ["send", "--experimental-dump-help"],
    ]

    @Test("anything else goes to the argument parser, with its messages", arguments: leftToTheParser)
    func otherwiseTheParser(_ arguments: [String]) {
        #expect(QuickSend(arguments) == nil)
    }

    /// A new option of `send` must be taught to QuickSend (or it would be refused there and silently go to the
    /// parser, which is only slower; but an option QuickSend knows and `Send` dropped would be read wrongly).
    @Test("Send declares exactly the options QuickSend knows")
    func sameOptions() {
        func names(_ value: Any) -> [String] {
            Mirror(reflecting: value).children.compactMap(\.label).map { label in
                let name = label.hasPrefix("_") ? String(label.dropFirst()) : label
                return "--" + name.map { $0.isUppercase ? "-" + $0.lowercased() : String($0) }.joined()
            }
        }
        let grouped: Set = ["--home-options", "--address-options"]
        let declared = Set(names(Send()) + names(HomeOptions()) + names(AddressOptions())).subtracting(grouped)
        #expect(declared == Set(QuickSend.valued + QuickSend.flags))
        #expect(Set(QuickSend.repeatable).isSubset(of: Set(QuickSend.valued)))
    }
}
