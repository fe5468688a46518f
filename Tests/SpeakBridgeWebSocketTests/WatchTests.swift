import Foundation
import Synchronization
import Testing
import SpeakBridgeWebSocket
#if canImport(Glibc)
import Glibc
#endif

/// `watchReadable`: a descriptor's readability handled on the client's service thread.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct WatchTests {
    /// What the handler saw: data read, end of input, and the threads it ran on.
    final class Reads: Sendable {
        let state = Mutex<(data: [UInt8], ends: Int, calls: Int, threads: Set<Int32>)>(([], 0, 0, []))

        /// One read per call, as the API asks.
        func handler(fd: Int32) -> @Sendable () -> Bool {
            { [self] in
                var buffer = [UInt8](repeating: 0, count: 4096)
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                let tid = currentTID()
                state.withLock {
                    $0.calls += 1
                    $0.threads.insert(tid)
                    if n > 0 { $0.data += buffer[0..<n] } else if n == 0 { $0.ends += 1 }
                }
                return n != 0
            }
        }

        var snapshot: (data: [UInt8], ends: Int, calls: Int, threads: Set<Int32>) { state.withLock { $0 } }

        func wait(timeout: Duration = .seconds(5), until condition: ((data: [UInt8], ends: Int, calls: Int, threads: Set<Int32>)) -> Bool) async -> Bool {
            let clock = ContinuousClock()
            let end = clock.now + timeout
            while clock.now < end {
                if condition(snapshot) { return true }
                try? await Task.sleep(for: .milliseconds(5))
            }
            return condition(snapshot)
        }
    }

    @Test func pipeDataAndEndReachTheHandlerOnTheServiceThread() async throws {
        let (readEnd, writeEnd) = try makePipe()
        defer { close(readEnd) }
        let client = try WebSocketClient { _ in }
        defer { client.shutdown() }
        let reads = Reads()
        let watch = client.watchReadable(fd: readEnd, onReadable: reads.handler(fd: readEnd))
        try #require(watch != nil)

        write(writeEnd, "hello ")
        #expect(await reads.wait { String(decoding: $0.data, as: UTF8.self) == "hello " })
        write(writeEnd, "world\n")
        #expect(await reads.wait { String(decoding: $0.data, as: UTF8.self) == "hello world\n" })
        close(writeEnd)
        #expect(await reads.wait { $0.ends == 1 })
        #expect(reads.snapshot.threads == [client.serviceThreadID])
        // The watch ended by itself at end of input: no more calls (a watched EOF would spin).
        let calls = reads.snapshot.calls
        try await Task.sleep(for: .milliseconds(300))
        #expect(reads.snapshot.calls == calls)
        #expect(reads.snapshot.ends == 1)
    }

    @Test func returningFalseEndsTheWatch() async throws {
        // A socket whose peer shut down writing stays readable (read returns 0) without a
        // hang-up, as a tty does after Ctrl-D: the handler has to end the watch.
        var pair: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer {
            close(pair[0])
            close(pair[1])
        }
        let client = try WebSocketClient { _ in }
        defer { client.shutdown() }
        let reads = Reads()
        try #require(client.watchReadable(fd: pair[0], onReadable: reads.handler(fd: pair[0])) != nil)
        write(pair[1], "last")
        shutdown(pair[1], Int32(SHUT_WR))
        #expect(await reads.wait { $0.ends == 1 })
        try await Task.sleep(for: .milliseconds(300))
        #expect(reads.snapshot.ends == 1)
        #expect(String(decoding: reads.snapshot.data, as: UTF8.self) == "last")
    }

    @Test func unwatchStopsTheHandlerAndReleasesTheDescriptor() async throws {
        let (readEnd, writeEnd) = try makePipe()
        defer { close(writeEnd) }
        let client = try WebSocketClient { _ in }
        defer { client.shutdown() }
        let reads = Reads()
        let watch = try #require(client.watchReadable(fd: readEnd, onReadable: reads.handler(fd: readEnd)))
        write(writeEnd, "one\n")
        #expect(await reads.wait { $0.data.count == 4 })

        client.unwatch(watch)
        // unwatch is queued; a watch request after it is answered only once it has been processed.
        let probe = try makePipe()
        defer { close(probe.0); close(probe.1) }
        _ = client.watchReadable(fd: probe.0) { true }
        let calls = reads.snapshot.calls
        write(writeEnd, "two\n")
        try await Task.sleep(for: .milliseconds(300))
        #expect(reads.snapshot.calls == calls)

        // The client's duplicate is closed: once ours goes too, the pipe has no reader left.
        close(readEnd)
        #expect(await pipeHasNoReader(writeEnd))
    }

    @Test func shutdownReleasesTheDescriptorWithoutCallingTheHandler() async throws {
        let (readEnd, writeEnd) = try makePipe()
        defer { close(writeEnd) }
        let client = try WebSocketClient { _ in }
        let reads = Reads()
        try #require(client.watchReadable(fd: readEnd, onReadable: reads.handler(fd: readEnd)) != nil)
        client.shutdown()
        #expect(reads.snapshot.calls == 0)
        close(readEnd)
        #expect(await pipeHasNoReader(writeEnd))
        #expect(client.watchReadable(fd: writeEnd) { true } == nil)
    }

    @Test func regularFilesAreRefused() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("sb-watch-\(getpid())").path
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        try #require(fd >= 0)
        defer {
            close(fd)
            unlink(path)
        }
        let client = try WebSocketClient { _ in }
        defer { client.shutdown() }
        #expect(client.watchReadable(fd: fd) { true } == nil)
        #expect(client.watchReadable(fd: -1) { true } == nil)
    }

    @Test func framesSentFromTheHandlerGoOut() async throws {
        let echo = try EchoServer()
        defer { echo.shutdown() }
        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        defer { client.shutdown() }
        let id = try await connectClient(client, log, port: echo.port)
        let (readEnd, writeEnd) = try makePipe()
        defer {
            close(readEnd)
            close(writeEnd)
        }
        let watch = client.watchReadable(fd: readEnd) {
            var buffer = [UInt8](repeating: 0, count: 256)
            let n = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
            if n > 0 { client.send(Array(buffer[0..<n]), on: id) }
            return n != 0
        }
        try #require(watch != nil)
        for line in ["a\n", "b\n", "c\n"] {
            let before = log.messages(id).count
            write(writeEnd, line)
            #expect(await log.wait { log.messages(id, $0).count == before + 1 })
        }
        #expect(log.messages(id).map { String(decoding: $0, as: UTF8.self) } == ["a\n", "b\n", "c\n"])
    }
}

private func makePipe() throws -> (Int32, Int32) {
    var fds: [Int32] = [0, 0]
    try #require(pipe(&fds) == 0)
    return (fds[0], fds[1])
}

private func write(_ fd: Int32, _ text: String) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
}

/// Whether writing to the pipe fails with EPIPE (every read end closed) within a few seconds.
/// SIGPIPE is ignored process-wide once an lws context has existed.
private func pipeHasNoReader(_ writeEnd: Int32) async -> Bool {
    let clock = ContinuousClock()
    let end = clock.now + .seconds(4)
    while clock.now < end {
        var byte: UInt8 = 0
        if Glibc.write(writeEnd, &byte, 1) < 0 && errno == EPIPE { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return false
}

/// The calling thread's kernel id, from /proc/thread-self ("PID/task/TID").
private func currentTID() -> Int32 {
    var buffer = [CChar](repeating: 0, count: 64)
    let n = readlink("/proc/thread-self", &buffer, buffer.count - 1)
    guard n > 0 else { return -1 }
    let text = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return Int32(text.split(separator: "/").last ?? "") ?? -1
}
