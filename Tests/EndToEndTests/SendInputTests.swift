import Foundation
import Testing

/// `send`'s input rules with the real binary (the rules themselves: `InputLinesTests`).
@Suite("End to end: send input", .serialized)
struct SendInputTests {
    @Test("a line that is one 40 KB character (a letter with 20,000 combining marks) arrives whole, in pieces")
    func hugeCharacter() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (_, reader) = try pair.startWithFIFO("dictation")
        defer { reader.stop() }
        let zalgo = "a" + String(repeating: "\u{0301}", count: 20_000)
        let outcome = try pair.sendLines([zalgo, "after"]).wait(timeout: 30)
        #expect(outcome.status == 0, "send failed: \(outcome.stderr)")
        try Harness.wait("4 lines on the FIFO") { reader.count >= 4 }
        let lines = reader.snapshot
        #expect(lines.count == 4)
        #expect(lines.dropLast().joined() == zalgo)
        #expect(lines.last == "after")
    }
}

/// `send`'s help and mistakes read as the full command tree words them (`speakbridge send`, its usage line), and a
/// clean parse runs; pinned when `send` was parsed on its own for a while (see the README's Experiments).
@Suite("End to end: send's command line")
struct SendParserTests {
    @Test func helpAndMistakesReadAsFromTheFullParser() throws {
        let home = "/tmp/sb-sendparse-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let help = try run(["send", "--help"], home: home)
        #expect(help.status == 0)
        #expect(help.stdout.contains("USAGE: speakbridge send"), "\(help.stdout)")
        let bad = try run(["send", "--timeout=-1", "--text", "x"], home: home)
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("--timeout must be 0 (keep trying) or a positive number of seconds"))
        #expect(bad.stderr.contains("Usage: speakbridge send"), "\(bad.stderr)")
        let unknown = try run(["send", "--nope"], home: home)
        #expect(unknown.status == 64)
        #expect(unknown.stderr.contains("Unknown option '--nope'"))
        #expect(unknown.stderr.contains("Usage: speakbridge send"), "\(unknown.stderr)")
        // Parsed and run for real: not paired here, so the store's error, not a parser's.
        let unpaired = try run(["send", "--text", "x"], home: home)
        #expect(unpaired.status == 1)
        #expect(unpaired.stderr.contains("not paired with any desktop"), "\(unpaired.stderr)")
    }
}
