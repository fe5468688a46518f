import Glibc
import Testing
import SpeakBridgeSinks

@Suite(.serialized) struct FIFOSinkTests {
    @Test func createsTheFIFOWithMode0600() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/dictation"
        let previous = umask(0o022)
        defer { umask(previous) }
        let sink = try FIFOSink(path: path)
        defer { sink.close() }
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(info.st_mode & S_IFMT == S_IFIFO)
        #expect(info.st_mode & 0o7777 == 0o600)
        #expect(sink.label == "fifo:\(path)")
        // An existing FIFO is reused as it is.
        let again = try FIFOSink(path: path)
        again.close()
    }

    @Test func refusesARegularFile() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/notes.txt"
        #expect(creat(path, 0o600) >= 0)
        do {
            _ = try FIFOSink(path: path)
            Issue.record("a regular file was accepted as FIFO")
        } catch {
            #expect(error.message.contains("not a FIFO"))
            #expect(error.hint != nil)
        }
        do {
            _ = try SinkFactory.make(.fifo(path: path), sanitize: true, environment: [:])
            Issue.record("the factory accepted a regular file as FIFO")
        } catch {
            #expect(error.message.contains("not a FIFO"))
        }
    }

    @Test func explainsAMissingDirectory() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        do {
            _ = try FIFOSink(path: "\(directory.path)/absent/dictation")
            Issue.record("mkfifo in a missing directory succeeded")
        } catch {
            #expect(error.message.contains("directory does not exist"))
        }
    }

    @Test func noReaderThenReaderLaterLosesNothing() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/dictation"
        let sink = try FIFOSink(path: path)
        defer { sink.close() }

        // No reader: waitUntilReady gives a reason once the timeout has passed, not much later.
        let clock = ContinuousClock()
        let started = clock.now
        let reason = sink.waitUntilReady(timeout: .milliseconds(300))
        let waited = clock.now - started
        #expect(reason?.contains("no reader on FIFO \(path)") == true)
        #expect(reason?.contains("cat \(path)") == true)
        #expect(waited >= .milliseconds(290) && waited < .seconds(10))
        #expect(sink.health?.contains("no reader") == true)

        // A delivery attempt without reader writes nothing and says so.
        var calls: [Int] = []
        do {
            try sink.deliver(["first"]) { calls.append($0) }
            Issue.record("delivered without a reader")
        } catch {
            #expect(error.delivered == 0)
            #expect(error.message.contains("no reader"))
        }
        #expect(calls.isEmpty)

        // A reader shows up later and gets everything, in order.
        let texts = ["first", "second line", "third: Grüße 🙂"]
        let reader = BackgroundThread { () -> [UInt8] in
            let fd = open(path, O_RDONLY)
            defer { close(fd) }
            return readUntil(fd: fd) { count(of: 0x0A, in: $0) >= 3 }
        }
        #expect(sink.waitUntilReady(timeout: .seconds(10)) == nil)
        #expect(sink.health == nil)
        try sink.deliver(texts) { calls.append($0) }
        #expect(calls.last == 3)
        #expect(difference(reader.join(timeout: .seconds(10)), framed(texts)) == nil)
    }

    @Test func thousandTextsArriveInOrderThroughASlowReader() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/dictation"
        let sink = try FIFOSink(path: path)
        defer { sink.close() }
        let texts = sampleTexts(1000)
        let expected = framed(texts)

        let reader = BackgroundThread { () -> [UInt8] in
            let fd = open(path, O_RDONLY)
            defer { close(fd) }
            // Reading late, in small reads with pauses, keeps the pipe full: the sink hits EAGAIN and long texts
            // get cut between two pieces.
            sleepFor(.milliseconds(200))
            return readUntil(fd: fd, deadline: .seconds(60), chunk: 1500, pause: .microseconds(200)) {
                $0.count >= expected.count
            }
        }
        let outcome = try PipelineDriver().run(sink, texts)
        #expect(outcome.durable == UInt64(texts.count))
        let received = reader.join(timeout: .seconds(60))
        #expect(difference(received, expected) == nil)
        #expect(outcome.recorded == UInt64(texts.count))
    }

    /// The reader closes halfway with unread bytes in the pipe; a new reader gets exactly the rest.
    @Test func readerClosesMidwayAndReopensWithoutLossOrDuplicates() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/dictation"
        let sink = try FIFOSink(path: path)
        defer { sink.close() }
        let texts = sampleTexts(3000)
        let expected = framed(texts)
        #expect(expected.count > 400_000)

        let readers = BackgroundThread { () -> (first: [UInt8], second: [UInt8], healthInGap: String?) in
            let fd1 = open(path, O_RDONLY)
            let first = readUntil(fd: fd1, chunk: 1000) { $0.count >= 50_000 }
            close(fd1)
            sleepFor(.milliseconds(300))  // the writer is stuck with a full pipe and no reader
            let healthInGap = sink.health
            let fd2 = open(path, O_RDONLY)
            defer { close(fd2) }
            let second = readUntil(fd: fd2, deadline: .seconds(60)) { first.count + $0.count >= expected.count }
            return (first, second, healthInGap)
        }
        let outcome = try PipelineDriver().run(sink, texts)
        #expect(outcome.durable == UInt64(texts.count))
        let result = try #require(readers.join(timeout: .seconds(90)))
        #expect(result.healthInGap?.contains("no reader") == true)
        let received = result.first + result.second
        #expect(difference(received, expected) == nil)
        // Every text was reported exactly up to the end, and arrived once.
        #expect(outcome.recorded == UInt64(texts.count))
        #expect(count(of: 0x0A, in: received) == texts.count)
    }

    /// A long text cut off by a full pipe whose rest will not come (its device was revoked meanwhile, so the next
    /// delivery is another text): its line is ended before the next text, which would otherwise continue it on
    /// the reader's side (one line holding two devices' words).
    @Test func aCutOffTextWhoseRestIsNotComingEndsItsLine() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/dictation"
        let sink = try FIFOSink(path: path)
        defer { sink.close() }
        let reader = open(path, O_RDONLY | O_NONBLOCK)
        try #require(reader >= 0)
        defer { close(reader) }
        #expect(fcntl(reader, 1031 /* F_SETPIPE_SZ */, 8_192) >= 8_192)
        let long = String(repeating: "x", count: 12_000)
        do {
            try sink.deliver([long]) { _ in }
            Issue.record("a 12,000-byte text fit an 8 KiB pipe")
        } catch {
            #expect(error.waitsForRoom && error.delivered == 0, "\(error)")
        }
        func drain() -> [UInt8] {
            var out: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 16_384)
            while true {
                let n = read(reader, &buffer, buffer.count)
                guard n > 0 else { return out }
                out += buffer[0..<n]
            }
        }
        let cut = drain()
        #expect(cut.count == 8_192 && cut.allSatisfy { $0 == UInt8(ascii: "x") })
        try sink.deliver(["another device's line"]) { _ in }
        #expect(String(decoding: drain(), as: UTF8.self) == "\nanother device's line\n")
    }

    @Test func sanitizesUnlessRaw() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        for (sanitize, expected) in [(true, "title\n"), (false, "\u{1B}]0;x\u{07}title\n")] {
            let path = "\(directory.path)/fifo-\(sanitize)"
            let sink = try FIFOSink(path: path, sanitize: sanitize)
            defer { sink.close() }
            let reader = BackgroundThread { () -> [UInt8] in
                let fd = open(path, O_RDONLY)
                defer { close(fd) }
                return readUntil(fd: fd) { $0.last == 0x0A }
            }
            #expect(sink.waitUntilReady(timeout: .seconds(10)) == nil)
            try sink.deliver(["\u{1B}]0;x\u{07}title"]) { _ in }
            #expect(reader.join(timeout: .seconds(10)) == Array(expected.utf8))
        }
    }

    @Test func closeGivesTheReaderEndOfFileAndStopsDelivery() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/dictation"
        let sink = try FIFOSink(path: path)
        let reader = BackgroundThread { () -> [UInt8] in
            let fd = open(path, O_RDONLY)
            defer { close(fd) }
            return readUntil(fd: fd) { _ in false }  // until end of file
        }
        #expect(sink.waitUntilReady(timeout: .seconds(10)) == nil)
        try sink.deliver(["last words"]) { _ in }
        sink.close()
        #expect(reader.join(timeout: .seconds(10)) == Array("last words\n".utf8))
        #expect(throws: SinkError.self) { try sink.deliver(["late"]) { _ in } }
        #expect(sink.waitUntilReady(timeout: .zero)?.contains("closed") == true)
    }

    @Test func recreatesARemovedFIFO() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/dictation"
        let sink = try FIFOSink(path: path)
        defer { sink.close() }
        #expect(unlink(path) == 0)
        #expect(sink.waitUntilReady(timeout: .milliseconds(50)) != nil)
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO)
    }

    // MARK: - Another local user (issue 8 row 5)

    static let isRoot = geteuid() == 0

    func expectRefusal(_ path: String, _ needle: String) {
        do {
            let sink = try FIFOSink(path: path)
            sink.close()
            Issue.record("the sink accepted \(path); expected a refusal mentioning \"\(needle)\"")
        } catch {
            #expect(error.message.contains(needle), "message: \(error.message)")
            #expect(error.hint != nil)
        }
    }

    @Test(.enabled(if: isRoot)) func refusesAFIFOAnotherUserCreated() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/dictation"
        #expect(mkfifo(path, 0o600) == 0)
        #expect(chmod(path, 0o666) == 0 && chown(path, 65534, 65534) == 0)
        expectRefusal(path, "owned by another user (uid 65534)")
    }

    @Test func refusesAFIFOThatOthersCanOpen() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/dictation"
        #expect(mkfifo(path, 0o600) == 0 && chmod(path, 0o644) == 0)
        expectRefusal(path, "can be opened by other users (mode 644)")
        // The remedy is a new FIFO, not a chmod: a reader that opened it while it was 0644 keeps its descriptor
        // after a chmod 600 and would get the dictation (shown here: the open survives the chmod).
        let held = open(path, O_RDONLY | O_NONBLOCK)
        #expect(held >= 0)
        defer { close(held) }
        #expect(chmod(path, 0o600) == 0)
        let writer = open(path, O_WRONLY | O_NONBLOCK)
        #expect(writer >= 0, "the held reader makes the FIFO writable")
        if writer >= 0 { close(writer) }
        #expect(chmod(path, 0o644) == 0)
        do {
            _ = try FIFOSink(path: path)
            Issue.record("accepted")
        } catch {
            #expect(error.hint?.contains("remove it") == true && error.hint?.contains("chmod would not close") == true,
                    "hint: \(error.hint ?? "")")
        }
    }

    @Test func refusesASymlinkToAFIFO() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let real = "\(directory.path)/real"
        #expect(mkfifo(real, 0o600) == 0)
        let link = "\(directory.path)/dictation"
        #expect(symlink(real, link) == 0)
        expectRefusal(link, "is a symbolic link")
    }

    @Test func willNotCreateAFIFOInADirectoryOthersCanWrite() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        #expect(chmod(directory.path, 0o777) == 0)
        let path = "\(directory.path)/dictation"
        expectRefusal(path, "writable by other users")
        var info = stat()
        #expect(lstat(path, &info) != 0, "no FIFO may be left behind")
    }

    @Test func refusesAFIFOSwappedInAfterStart() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/dictation"
        let sink = try FIFOSink(path: path)
        defer { sink.close() }
        // Before the first write: the FIFO is replaced by one that others can open, and a reader waits on it.
        #expect(unlink(path) == 0 && mkfifo(path, 0o600) == 0 && chmod(path, 0o666) == 0)
        let reader = open(path, O_RDONLY | O_NONBLOCK)
        #expect(reader >= 0)
        defer { _ = Glibc.close(reader) }
        let reason = sink.waitUntilReady(timeout: .milliseconds(200))
        #expect(reason?.contains("other users") == true, "reason: \(reason ?? "ready")")
        #expect(throws: SinkError.self) { try sink.deliver(["secret words"]) { _ in } }
        var byte: UInt8 = 0
        #expect(read(reader, &byte, 1) <= 0, "nothing reached the swapped-in FIFO")
    }
}
