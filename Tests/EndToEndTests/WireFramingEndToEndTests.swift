#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeProtocol
import Testing

/// A real `send` → a real `serve` with the client's frames framed and masked by SpeakBridge itself
/// (`ClientFrame`, `MaskingKeys`) and each chunk's JSON escaped once, for the journal and the message alike
/// (`Chunk.encoded`): lines of every frame size (7- and 16-bit lengths; a frame is at most 65,535 bytes) and of every
/// kind of character, in a burst and one by one, arrive exactly once, in order, with their exact text.
@Suite("End to end: client frames built by SpeakBridge", .serialized)
struct WireFramingEndToEndTests {
    @Test("short, long and escaped lines, burst then paced, arrive once, in order, exact")
    func everyFrameSizeArrives() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (reader, stopReader) = try pair.startRawJSONLReader()
        defer { stopReader() }
        try pair.join()
        let kinds = ["plain words", "quote \" backslash \\ tab \t bell \u{7}", "C1 \u{85} bidi \u{202E} sep \u{2028}",
                     "emoji 😀 and 中文 and e\u{301}", "\u{1}\u{1F}\u{7F}", "x"]
        var lines: [String] = []
        for i in 0..<600 { lines.append("\(i) " + kinds[i % kinds.count]) }
        lines += [String(repeating: "long line ", count: 100), String(repeating: "w", count: 16_000),
                  String(repeating: "\u{1}", count: 10_000), "after the long ones"]
        let (send, writer) = try pair.pipedSend()
        // A burst: all at once (batched frames up to the frame limit) ...
        try writer.write(contentsOf: Data(lines.map { $0 + "\n" }.joined().utf8))
        try Harness.wait("the burst on the jsonl FIFO", timeout: 30) { reader.count >= lines.count }
        // ... then paced lines, each its own small frame.
        var paced: [String] = []
        for i in 0..<20 {
            let line = "paced \(i) " + kinds[i % kinds.count]
            paced.append(line)
            try writer.write(contentsOf: Data((line + "\n").utf8))
            let expected = lines.count + i + 1
            try Harness.wait("paced line \(i)", timeout: 10) { reader.count >= expected }
        }
        try writer.close()
        let outcome = try send.wait(timeout: 30)
        #expect(outcome.status == 0, "send failed: \(outcome.stderr)")
        usleep(100_000)
        var seqs: [Int64] = []
        var texts: [String] = []
        for line in reader.snapshot {
            guard let object = try? JSONValue.parse(Array(line.utf8), maxBytes: 1 << 20),
                  let seq = object["seq"]?.int64Value, let text = object["text"]?.stringValue else {
                Issue.record("not a chunk line: \(line.prefix(200))")
                continue
            }
            seqs.append(seq)
            texts.append(text)
        }
        let all = lines + paced
        #expect(seqs == Array(1...Int64(all.count)))
        #expect(texts == all)
        let log = pair.daemon!.stderr
        // One connection, closed once (at the end): a frame the desktop refused would have closed it and made `send`
        // reconnect. (No search for close codes such as 1002: the log's port and paths hold random digits.)
        #expect(!log.contains("error"), "\(log.suffix(1_000))")
        #expect(log.components(separatedBy: "connection closed").count <= 2, "\(log.suffix(1_000))")
    }
}
