import Foundation
import Testing

/// `serve`'s help and mistakes read as the full command tree words them (`speakbridge serve`, its usage line); pinned
/// when `serve` was parsed on its own for a while (see the README's Experiments).
@Suite("End to end: serve's command line")
struct ServeParserTests {
    @Test func helpAndMistakesReadAsFromTheFullParser() throws {
        let home = "/tmp/sb-serveparse-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let help = try run(["serve", "--help"], home: home)
        #expect(help.status == 0)
        #expect(help.stdout.contains("USAGE: speakbridge serve"), "\(help.stdout)")
        let bad = try run(["serve", "--pairing-lifetime", "0", "--no-mdns"], home: home)
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("--pairing-lifetime must be between 1 and 3600 seconds"), "\(bad.stderr)")
        #expect(bad.stderr.contains("Usage: speakbridge serve"), "\(bad.stderr)")
        let unknown = try run(["serve", "--nope"], home: home)
        #expect(unknown.status == 64)
        #expect(unknown.stderr.contains("Unknown option '--nope'"))
        #expect(unknown.stderr.contains("Usage: speakbridge serve"), "\(unknown.stderr)")
        // Parsed by the fast path, run for real: the sink is refused by `run`, not by a parser.
        let sink = try run(["serve", "--listen", "127.0.0.1:0", "--no-mdns", "--no-web", "--sink", "bogus:"], home: home)
        #expect(sink.status == 1)
        #expect(sink.stderr.contains("unknown sink 'bogus:'"), "\(sink.stderr)")
        #expect(sink.stderr.contains("hint: valid sinks:"), "\(sink.stderr)")
    }

    /// `pair-accept.name` is at most 64 bytes and a client refuses a longer one, so with a 70-byte `--name` every
    /// pairing failed (reported as "already used", the code spent); the mDNS instance name allows 63. Before
    /// 2026-12-07 `serve` took any name; now a name over 63 bytes (or an empty one) is a startup error.
    @Test func aNameOverTheLimitIsAStartupError() throws {
        let home = "/tmp/sb-serveparse-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        // A daemon that starts anyway (the old code) is stopped, not left running.
        func serve(name: String) throws -> Outcome {
            let p = try Proc(["serve", "--listen", "127.0.0.1:0", "--no-mdns", "--no-web", "--name", name], home: home,
                             label: "serve-name-\(UInt32.random(in: 0...UInt32.max))")
            defer {
                p.terminate()
                try? FileManager.default.removeItem(atPath: p.stdoutPath)
                try? FileManager.default.removeItem(atPath: p.stderrPath)
            }
            return try p.wait(timeout: 10)
        }
        for (name, bytes) in [(String(repeating: "n", count: 70), 70), (String(repeating: "é", count: 32), 64)] {
            let long = try serve(name: name)
            #expect(long.status == 64, "\(long.stderr)")
            #expect(long.stderr.contains("--name: the desktop's name is \(bytes) bytes of UTF-8; at most 63 fit"),
                    "\(long.stderr)")
        }
        let empty = try serve(name: "")
        #expect(empty.status == 64 && empty.stderr.contains("--name: the desktop's name must not be empty"),
                "\(empty.stderr)")
    }
}
