import Glibc
import Testing
import SpeakBridgeSinks

@Suite struct StdoutSinkTests {
    @Test func writesLinesThroughAPipeInOrder() throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let texts = sampleTexts(1000)
        let expected = framed(texts)
        let reader = BackgroundThread { [readEnd = ends[0]] in
            readUntil(fd: readEnd, chunk: 777) { $0.count >= expected.count }
        }
        let sink = StdoutSink(fd: ends[1])
        #expect(sink.label == "stdout")
        #expect(sink.waitUntilReady(timeout: .seconds(1)) == nil)
        var progress: [Int] = []
        try sink.deliver(texts) { progress.append($0) }
        close(ends[1])
        #expect(difference(reader.join(timeout: .seconds(30)), expected) == nil)
        #expect(progress.last == texts.count)
        #expect(progress == progress.sorted() && Set(progress).count == progress.count)
    }

    @Test func sanitizesByDefaultAndNotWhenRaw() throws {
        for (sanitize, expected) in [(true, "ab\nc\n"), (false, "a\u{1B}[2Jb\rc\n")] {
            var ends: [Int32] = [-1, -1]
            #expect(pipe(&ends) == 0)
            let sink = StdoutSink(fd: ends[1], sanitize: sanitize)
            try sink.deliver(["a\u{1B}[2Jb\rc"]) { _ in }
            close(ends[1])
            #expect(readUntil(fd: ends[0]) { _ in false } == Array(expected.utf8))
            close(ends[0])
        }
    }

    /// The reader is gone: EPIPE becomes a SinkError (and SIGPIPE does not kill the test process).
    @Test func readerGoneIsAnErrorNotACrash() throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        defer { close(ends[1]) }
        close(ends[0])
        let sink = StdoutSink(fd: ends[1])
        #expect(sink.waitUntilReady(timeout: .milliseconds(100))?.contains("went away") == true)
        var calls: [Int] = []
        do {
            try sink.deliver(["one", "two"]) { calls.append($0) }
            Issue.record("write to a pipe without reader succeeded")
        } catch {
            #expect(error.delivered == 0)
            #expect(error.message.contains("went away"))
        }
        #expect(calls == [2])  // recorded before the write, which then failed: `delivered` is the truth
        #expect(sink.health != nil)
    }

    @Test func reportsTextsFullyWrittenBeforeTheFailure() throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        defer { close(ends[1]) }
        // A reader that takes exactly the first 4 KiB chunk's worth and then leaves.
        let texts = (0..<200).map { "line \($0) " + String(repeating: "x", count: 90) }  // 100 bytes each
        let reader = BackgroundThread { [readEnd = ends[0]] () -> [UInt8] in
            let got = readUntil(fd: readEnd, chunk: 4096) { $0.count >= 4000 }
            close(readEnd)
            return got
        }
        let sink = StdoutSink(fd: ends[1])
        var delivered = texts.count
        // 200 * 100 bytes = 20 KB fits the pipe; keep writing until the closed reader is noticed.
        for _ in 0..<50 {
            do { try sink.deliver(texts) { _ in } } catch {
                delivered = error.delivered
                break
            }
            sleepFor(.milliseconds(20))
        }
        #expect(delivered < texts.count)
        #expect(reader.join(timeout: .seconds(10)) != nil)
    }
}
