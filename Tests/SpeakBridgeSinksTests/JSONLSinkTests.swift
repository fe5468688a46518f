import Glibc
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeSinks
import Testing

/// `jsonl:PATH`: the exact line format, and the FIFO rules it shares with `fifo:` (real FIFOs, real readers).
@Suite(.serialized) struct JSONLSinkTests {
    let device = DeviceID(publicKeyDigest: SHA256.hash(Array("jsonl-device".utf8)))

    /// Delivers `items` into a fresh jsonl FIFO and returns exactly what a reader read.
    func roundTrip(_ items: [SinkItem], sanitize: Bool = true) throws -> [UInt8]? {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/dictation.jsonl"
        let sink = try JSONLSink(path: path, sanitize: sanitize)
        defer { sink.close() }
        #expect(sink.label == "jsonl:\(path)")
        #expect(sink.deliveryClass == .recordAfterWrite)
        let lines = items.count
        let reader = BackgroundThread { () -> [UInt8] in
            let fd = open(path, O_RDONLY)
            defer { close(fd) }
            return readUntil(fd: fd, deadline: .seconds(10)) { count(of: 0x0A, in: $0) >= lines }
        }
        #expect(sink.waitUntilReady(timeout: .seconds(10)) == nil)
        var before: [Int] = []
        var after: [Int] = []
        try sink.deliver(items, willWrite: { before.append($0) }, didWrite: { after.append($0) })
        #expect(before.last == items.count && after.last == items.count)
        return reader.join(timeout: .seconds(10))
    }

    @Test func oneObjectPerLineWithOptionalFieldsOnlyWhenPresent() throws {
        let items = [
            SinkItem(device: device, deviceName: "Pixel \"8\"", session: "s1", chunk: Chunk(seq: 1, text: "hello")),
            SinkItem(device: device, session: "s1",
                     chunk: Chunk(seq: 2, text: "two\nlines", lang: "de", speaker: "A", start: 1.5, end: 2.25)),
        ]
        let expected = """
            {"device":"\(device)","name":"Pixel \\"8\\"","session":"s1","seq":1,"text":"hello"}
            {"device":"\(device)","session":"s1","seq":2,"text":"two\\nlines","lang":"de","speaker":"A","start":1.5,"end":2.25}

            """
        let received = try roundTrip(items)
        #expect(difference(received, Array(expected.utf8)) == nil)
        // Each line is one JSON object a reader can parse back to the same fields.
        let lines = String(decoding: received ?? [], as: UTF8.self).split(separator: "\n")
        let second = try JSONValue.parse(Array(lines[1].utf8))
        #expect(second["text"]?.stringValue == "two\nlines")
        #expect(second["seq"]?.int64Value == 2)
    }

    @Test func textIsSanitizedLikeTheFIFOThenEscapedUnlessRaw() throws {
        let text = "\u{1B}]0;x\u{07}title\u{1B}[31m red\r\nnext\u{202E}"
        let item = SinkItem(device: device, session: "s", chunk: Chunk(seq: 7, text: text))
        let sanitized = try roundTrip([item])
        let clean = #"{"device":"\#(device)","session":"s","seq":7,"text":"title red\nnext\#u{FFFD}"}"# + "\n"
        #expect(difference(sanitized, Array(clean.utf8)) == nil)
        // --raw: the peer's bytes, JSON-escaped (an escape sequence still never reaches a terminal raw).
        let raw = try roundTrip([item], sanitize: false)
        let escaped = #"{"device":"\#(device)","session":"s","seq":7,"text":"\u001b]0;x\u0007title\u001b[31m red\r\nnext\u202e"}"#
        #expect(difference(raw, Array((escaped + "\n").utf8)) == nil)
    }

    /// Through the real pipeline: 600 chunks (some longer than PIPE_BUF) arrive once each, in order, as JSON lines
    /// with consecutive seqs, and the progress log says the last one was written.
    @Test func aStreamArrivesAsConsecutiveLines() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/dictation.jsonl"
        let sink = try JSONLSink(path: path)
        let texts = sampleTexts(600)
        let reader = BackgroundThread { () -> [UInt8] in
            let fd = open(path, O_RDONLY)
            defer { close(fd) }
            return readUntil(fd: fd, deadline: .seconds(60), chunk: 1500) { count(of: 0x0A, in: $0) >= texts.count }
        }
        let outcome = try PipelineDriver().run(sink, texts, name: "desk")
        #expect(outcome.durable == UInt64(texts.count) && outcome.recorded == UInt64(texts.count))
        let lines = String(decoding: try #require(reader.join(timeout: .seconds(60))), as: UTF8.self)
            .split(separator: "\n")
        #expect(lines.count == texts.count)
        for (index, line) in lines.enumerated() {
            let object = try JSONValue.parse(Array(line.utf8))
            #expect(object["seq"]?.int64Value == Int64(index + 1))
            #expect(object["text"]?.stringValue == texts[index])
            #expect(object["name"]?.stringValue == "desk")
            #expect(object["device"]?.stringValue == PipelineDriver.device.description)
        }
    }

    /// The FIFO rules are `fifo:`'s own: a symlink, a FIFO others can open, another user's FIFO are refused.
    @Test func theFIFORulesAreTheFIFOSinks() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let real = "\(directory.path)/real"
        #expect(mkfifo(real, 0o600) == 0)
        let link = "\(directory.path)/link"
        #expect(symlink(real, link) == 0)
        #expect(throws: SinkError.self) { _ = try JSONLSink(path: link) }
        let open = "\(directory.path)/open"
        #expect(mkfifo(open, 0o600) == 0 && chmod(open, 0o644) == 0)
        do {
            _ = try SinkFactory.make(try SinkSpec(parsing: "jsonl:\(open)"), sanitize: true, environment: [:])
            Issue.record("a FIFO others can open was accepted")
        } catch let error as SinkError {
            #expect(error.message.contains("can be opened by other users"))
        }
        if geteuid() == 0 {
            #expect(chmod(real, 0o600) == 0 && chown(real, 65534, 65534) == 0)
            do {
                _ = try JSONLSink(path: real)
                Issue.record("another user's FIFO was accepted")
            } catch {
                #expect(error.message.contains("owned by another user"))
            }
        }
    }

    /// A line longer than PIPE_BUF goes out in pieces. If the desktop dies between two pieces (here: the first
    /// sink is dropped with its pipe full, mid-line) the restarted sink writes the whole line again: the reader
    /// sees one line that starts with the torn piece, and the documented rule — parse from the last
    /// `{"device":` — recovers exactly the object. (`{"device":` cannot occur inside a string: `"` is escaped.)
    @Test func aLineTornByACrashIsRecoveredFromItsLastObjectStart() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/dictation.jsonl"
        let text = String(repeating: "long {\"device\":\"x\"} line ", count: 4_000)  // ~100 KB, quotes inside
        let item = SinkItem(device: device, session: "s", chunk: Chunk(seq: 1, text: text))
        let dying = try JSONLSink(path: path)
        let fd = open(path, O_RDONLY | O_NONBLOCK)  // a reader that is there but not reading yet
        defer { close(fd) }
        #expect(dying.waitUntilReady(timeout: .seconds(5)) == nil)
        do {
            try dying.deliver([item], willWrite: { _ in }, didWrite: { _ in })
            Issue.record("a 100 KB line fit into the pipe")
        } catch {
            #expect(error.delivered == 0 && error.message.contains("is full"))
        }
        dying.close()  // the desktop dies with part of the line in the pipe
        let restarted = try JSONLSink(path: path)
        defer { restarted.close() }
        // The write end is open before the reader starts: a reader that drained the torn piece while no writer
        // had the FIFO open would read end-of-file and stop (a race that failed this test on a loaded machine).
        _ = restarted.waitUntilReady(timeout: .milliseconds(10))
        let reader = BackgroundThread { readUntil(fd: fd, deadline: .seconds(20)) { $0.last == 0x0A } }
        var written = false
        for _ in 0..<200 where !written {
            _ = restarted.waitUntilReady(timeout: .seconds(1))
            written = (try? restarted.deliver([item], willWrite: { _ in }, didWrite: { _ in })) != nil
        }
        #expect(written)
        let line = try #require(reader.join(timeout: .seconds(20))).dropLast()  // the line feed
        #expect((try? JSONValue.parse(Array(line))) == nil, "the torn piece makes the line itself invalid")
        let marker = Array(#"{"device":"#.utf8)
        let start = try #require((0...(line.count - marker.count)).last { Array(line.dropFirst($0).prefix(marker.count)) == marker })
        let object = try JSONValue.parse(Array(line.dropFirst(start)), maxBytes: 1 << 20)
        #expect(object["text"]?.stringValue == text && object["seq"]?.int64Value == 1)
    }
}
