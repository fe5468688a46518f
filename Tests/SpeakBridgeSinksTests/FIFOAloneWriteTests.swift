import Glibc
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeSinks
import Testing

/// The FIFO sink's one-text write (`deliver` of one item: one writev of the text and "\n", no plan) against the
/// plan path (`deliver` of texts): the same bytes for every kind of text, and the same progress calls and errors
/// when the pipe is full or has no reader. Real FIFOs.
@Suite(.serialized) struct FIFOAloneWriteTests {
    let device = DeviceID(publicKeyDigest: SHA256.hash(Array("alone-device".utf8)))

    static let texts: [String] = [
        "", "hello", "tab\there", "two\nlines", "é unicode ✓", "\u{1B}]0;x\u{07}title", "ctl\u{7F}x",
        String(repeating: "a", count: 15), String(repeating: "b", count: 16), String(repeating: "c", count: 4095),
        String(repeating: "d", count: 4096), String(repeating: "e", count: 9000), String(repeating: "é", count: 2047),
    ]

    /// Everything readable from `fd` now.
    func drain(_ fd: Int32) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            guard n > 0 else { return out }
            out += buffer[0..<n]
        }
    }

    @Test(arguments: [true, false])
    func oneItemWritesWhatThePlanPathWrites(sanitize: Bool) throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let (alonePath, planPath) = ("\(directory.path)/alone", "\(directory.path)/plan")
        let alone = try FIFOSink(path: alonePath, sanitize: sanitize)
        let plan = try FIFOSink(path: planPath, sanitize: sanitize)
        defer { alone.close(); plan.close() }
        let aloneReader = open(alonePath, O_RDONLY | O_NONBLOCK)
        let planReader = open(planPath, O_RDONLY | O_NONBLOCK)
        defer { close(aloneReader); close(planReader) }
        try #require(aloneReader >= 0 && planReader >= 0)
        for (index, text) in Self.texts.enumerated() {
            var calls: [String] = []
            try alone.deliver([SinkItem(device: device, session: "s", chunk: Chunk(seq: UInt64(index + 1), text: text))],
                              willWrite: { calls.append("will \($0)") }, didWrite: { calls.append("did \($0)") })
            try plan.deliver([text]) { _ in }
            #expect(calls.first == "will 1" && calls.last == "did 1", "\(calls)")
            let (a, p) = (drain(aloneReader), drain(planReader))
            #expect(a == p, "text \(index) (\(text.utf8.count) bytes)")
            #expect(a.last == 0x0A)
        }
    }

    @Test func aFullPipeAndAMissingReaderFailAsThePlanPathDoes() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/full"
        let sink = try FIFOSink(path: path)
        defer { sink.close() }
        let reader = open(path, O_RDONLY | O_NONBLOCK)
        try #require(reader >= 0)
        let text = String(repeating: "x", count: 1000)
        var written = 0
        var failure: SinkError?
        var willCalls = 0
        for seq in 1...1_000 {
            do throws(SinkError) {
                try sink.deliver([SinkItem(device: device, session: "s", chunk: Chunk(seq: UInt64(seq), text: text))],
                                 willWrite: { _ in willCalls += 1 }, didWrite: { _ in })
                written += 1
            } catch {
                failure = error
                break
            }
        }
        let full = try #require(failure, "a pipe never filled up")
        #expect(full.delivered == 0)
        #expect(full.message == "FIFO \(path) is full: its reader is not reading")
        #expect(willCalls == written + 1, "progress is recorded before the write that then failed (the caller rolls back)")
        // Whole lines only: what the pipe took is exactly the lines that were reported written.
        let got = drain(reader)
        #expect(got.count == written * 1001)
        // Room again: the next line goes in.
        try sink.deliver([SinkItem(device: device, session: "s", chunk: Chunk(seq: 9_999, text: "after"))],
                         willWrite: { _ in }, didWrite: { _ in })
        #expect(drain(reader) == Array("after\n".utf8))
        // No reader: EPIPE, said as the plan path says it.
        close(reader)
        do throws(SinkError) {
            try sink.deliver([SinkItem(device: device, session: "s", chunk: Chunk(seq: 10_000, text: "lost"))],
                             willWrite: { _ in }, didWrite: { _ in })
            Issue.record("a write without reader succeeded")
        } catch {
            #expect(error.delivered == 0)
            #expect(error.message == "no reader on FIFO \(path)")
            #expect(error.hint == "open it with `cat \(path)`")
        }
    }
}
