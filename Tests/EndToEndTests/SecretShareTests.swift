#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

/// Issue 8 row 8: a paired device cannot take the desktop's secrets without a decision on the desktop.
@Suite("End to end: secrets leave only on the desktop's decision", .serialized)
struct SecretShareTests {
    static let secret = "dg_5e2d3b0f88c15e2ab4d7f6c9e3180a4b"

    func config(_ args: [String], _ home: String) throws -> Outcome {
        let out = try run(["config"] + args, home: home)
        #expect(out.status == 0, "config \(args.joined(separator: " ")) failed: \(out.stderr)")
        return out
    }

    func value(_ key: String, _ home: String) throws -> String? {
        let out = try run(["config", "get", key, "--reveal"], home: home)
        return out.status == 0 ? out.stdout.trimmingCharacters(in: .newlines) : nil
    }

    @Test("a paired device's pull gets no secret by default; after `config share all` on the desktop it does")
    func pullGetsNoSecretByDefault() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        _ = try config(["set", "deepgram.apiKey", Self.secret, "--secret"], pair.desktopHome)
        _ = try config(["set", "transcription.locale", "de-CH"], pair.desktopHome)
        _ = try config(["policy", "accept"], pair.phoneHome)  // the phone applies what it gets at once
        #expect(try config(["share"], pair.desktopHome).stdout == "share: public\n")

        let pull = try config(["pull"], pair.phoneHome)
        #expect(pull.stderr.contains("withheld 1 secret(s)"), "the phone is told why: \(pull.stderr)")
        #expect(pull.stderr.contains("speakbridge config share all"))
        #expect(try value("transcription.locale", pair.phoneHome) == "de-CH", "public keys still travel")
        #expect(try value("deepgram.apiKey", pair.phoneHome) == nil, "no secret without a decision on the desktop")
        try Harness.wait("the desktop to log the withheld secret") {
            TerminalBytes.read(pair.daemon!.stderrPath).contains("withheld 1 secret(s)")
        }

        // The desktop user decides: every paired device may pull secrets now.
        let share = try config(["share", "all"], pair.desktopHome)
        #expect(share.stderr.contains("warning: every paired device can now pull every secret"))
        let second = try config(["pull"], pair.phoneHome)
        #expect(!second.stderr.contains("withheld"))
        #expect(try value("deepgram.apiKey", pair.phoneHome) == Self.secret)
        // The choice survives a reload of the settings (it is confirmed, not a leftover default).
        #expect(try config(["share"], pair.desktopHome).stdout == "share: all\n")
    }

    @Test("settings written by an older version with its default share all are read as public")
    func legacyDefaultAllIsPublic() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        _ = try config(["set", "deepgram.apiKey", Self.secret, "--secret"], pair.desktopHome)
        _ = try config(["policy", "accept"], pair.phoneHome)
        // What versions before issue 8 wrote: "share":"all" with no confirmation.
        let path = pair.desktopHome + "/config/settings.json"
        var settings = try String(contentsOfFile: path, encoding: .utf8)
        settings = settings.replacingOccurrences(of: #""share":"public","shareConfirmed":false"#, with: #""share":"all""#)
        #expect(settings.contains(#""share":"all""#))
        try settings.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try config(["share"], pair.desktopHome).stdout == "share: public\n")
        _ = try config(["pull"], pair.phoneHome)
        #expect(try value("deepgram.apiKey", pair.phoneHome) == nil)
    }
}
