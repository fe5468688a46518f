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
