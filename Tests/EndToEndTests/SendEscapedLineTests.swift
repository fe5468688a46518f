#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeProtocol
import Testing

/// `send` with lines whose JSON form is much larger than their UTF-8 (the split rule: `InputLinesTests`). A control
/// is written as `\uXXXX` (6 bytes for 1 of UTF-8): 16,384 of them took 98 KiB in a `chunk` message, more than a
/// frame holds, so `send` could not encrypt it, went silent until the ack timeout, reconnected and tried the same
/// chunk again, and everything after it stayed stuck in the outbox.
@Suite("End to end: send lines that grow when escaped", .serialized)
struct SendEscapedLineTests {
    @Test("16 KiB lines of C0 controls, C1 controls, quotes and backslashes arrive exactly once, in order")
    func escapedLines() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (reader, stopReader) = try pair.startRawJSONLReader()
        defer { stopReader() }
        try pair.join()
        let lines = [String(repeating: "\u{1}", count: 16_384), String(repeating: "\u{85}", count: 16_384),
                     String(repeating: "\"\\", count: 8_192), "after"]
        let outcome = try pair.sendLines(lines).wait(timeout: 45)
        #expect(outcome.status == 0, "send failed: \(outcome.stderr)")
        #expect(!outcome.stderr.contains("warning"), "\(outcome.stderr)")
        // 98,304 escaped bytes: 2 chunks; 32,768 bytes of UTF-8: 2; 32,768 escaped bytes: 1; "after": 1.
        try Harness.wait("6 chunks on the jsonl FIFO", timeout: 10) { reader.count >= 6 }
        usleep(200_000)
        var seqs: [Int64] = []
        var texts: [String] = []
        for line in reader.snapshot {
            guard let object = try? JSONValue.parse(Array(line.utf8)), let seq = object["seq"]?.int64Value,
                  let text = object["text"]?.stringValue else {
                Issue.record("not a chunk line: \(line.prefix(200))")
                continue
            }
            seqs.append(seq)
            texts.append(text)
        }
        #expect(seqs == Array(1...6))
        guard texts.count == 6 else { return }
        #expect(texts[0] + texts[1] == lines[0])
        #expect(texts[2] + texts[3] == lines[1])
        #expect(texts[4] == lines[2])
        #expect(texts[5] == "after")
        // (The daemon may warn that the test's FIFO reader is slow: it reads 512 bytes at a time.)
        let log = pair.daemon!.stderr
        // "close 1009", not "1009": the log also holds a random port and temporary paths, which may contain it.
        #expect(!log.contains("error") && !log.contains("too-large") && !log.contains("close 1009"), "\(log.suffix(1_000))")
    }
}
