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
}
