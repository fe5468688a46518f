import SpeakBridgeSupport
import Synchronization
import Testing
import SpeakBridgeWebSocket
#if canImport(Glibc)
import Glibc
#endif

/// `WebSocketClient.watchReadable`: a pipe's input read on the service thread, to its end.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct WatchTests {
    /// What a watch handler read: the bytes in order, the threads it ran on, whether it saw the end.
    final class Reader: Sendable {
        let fd: Int32
        let state = Locked<(bytes: [UInt8], threads: Set<Int32>, ended: Bool)>(([], [], false))

        init(fd: Int32) { self.fd = fd }

        /// One read per readable call; after a hang-up, to the end. False once the end was read.
        func onReadable(_ hungUp: Bool) -> Bool {
            repeat {
                var buffer = [UInt8](repeating: 0, count: 65_536)
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                let tid = Self.threadID()
                state.withLock { state in
                    state.threads.insert(tid)
                    if n > 0 { state.bytes += buffer[0..<n] } else { state.ended = true }
                }
                if n <= 0 { return false }
            } while hungUp
            return true
        }

        /// The calling thread's kernel ID (/proc/thread-self is "PID/task/TID"; gettid is not in Swift's Glibc).
        static func threadID() -> Int32 {
            var link = [CChar](repeating: 0, count: 64)
            let n = readlink("/proc/thread-self", &link, link.count - 1)
            guard n > 0 else { return -1 }
            let text = String(decoding: link[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return Int32(text.split(separator: "/").last ?? "") ?? -1
        }

        func waitEnded() async -> Bool {
            for _ in 0..<1_000 where !state.withLock({ $0.ended }) {
                try? await Task.sleep(for: .milliseconds(5))
            }
            return state.withLock { $0.ended }
        }
    }

    static func pattern(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 / 251) } }

    /// A pipe, a client and a `Reader` of the pipe's read end for `body`, which gets the write end (and closes it);
    /// the read end and the client are closed after it.
    static func withPipe(_ body: (_ writer: Int32, _ client: WebSocketClient, _ reader: Reader) async throws -> Void)
        async throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let client = try WebSocketClient(onEvent: { _ in })
        defer { client.shutdown() }
        try await body(ends[1], client, Reader(fd: ends[0]))
    }

    @Test func aPipeIsReadOnTheServiceThreadToItsEnd() async throws {
        try await Self.withPipe { writer, client, reader in
            #expect(client.watchReadable(fd: reader.fd, onReadable: reader.onReadable) != nil)
            // More than a pipe holds: the watch must keep reading while the writer is blocked.
            let data = Self.pattern(300_000)
            _ = Threads.start(name: "test-writer") {
                var offset = 0
                while offset < data.count {
                    let n = data[offset...].withUnsafeBytes { write(writer, $0.baseAddress, $0.count) }
                    if n <= 0 { break }
                    offset += n
                }
                close(writer)
            }
            #expect(await reader.waitEnded())
            let state = reader.state.withLock { $0 }
            #expect(state.bytes == data)
            #expect(state.threads == [client.serviceThreadID])
        }
    }

    /// Something only a watch's handler holds.
    final class Token: Sendable {}

    /// A watch that ended lets its handler go while the client runs on (the loop remembers the last watch it found,
    /// and must forget it with the watch): whatever the handler captured is not kept alive.
    @Test func anEndedWatchLetsItsHandlerGo() async throws {
        try await Self.withPipe { writer, client, reader in
            weak var held: Token?
            do {
                let token = Token()
                held = token
                let handler: @Sendable (Bool) -> Bool = { [token] hungUp in
                    withExtendedLifetime(token) { reader.onReadable(hungUp) }
                }
                let watch = client.watchReadable(fd: reader.fd, onReadable: handler)
                #expect(watch != nil)
            }
            let line = Array("one line\n".utf8)
            #expect(line.withUnsafeBytes { write(writer, $0.baseAddress, $0.count) } == line.count)
            close(writer)
            #expect(await reader.waitEnded())
            for _ in 0..<200 where held != nil {
                try? await Task.sleep(for: .milliseconds(5))
            }
            #expect(held == nil)
            #expect(reader.state.withLock { $0.bytes } == line)
        }
    }

    @Test func whatIsLeftAfterTheWriterClosedIsReadWhole() async throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]) }
        // A pipe holding more than one read takes (64 KiB), its writer gone before the watch starts.
        _ = fcntl(ends[1], 1031, 1 << 20)  // F_SETPIPE_SZ (not in Swift's Glibc module)
        let data = Self.pattern(400_000)
        let written = data.withUnsafeBytes { write(ends[1], $0.baseAddress, $0.count) }
        close(ends[1])
        try #require(written == data.count, "the pipe could not be enlarged here")
        let client = try WebSocketClient(onEvent: { _ in })
        defer { client.shutdown() }
        let reader = Reader(fd: ends[0])
        #expect(client.watchReadable(fd: ends[0], onReadable: reader.onReadable) != nil)
        #expect(await reader.waitEnded())
        #expect(reader.state.withLock { $0.bytes } == data)
    }

    @Test func aRegularFileIsNotWatched() throws {
        var template = Array("/tmp/sb-watch-XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        try #require(fd >= 0)
        defer {
            close(fd)
            unlink(template)
        }
        let client = try WebSocketClient(onEvent: { _ in })
        defer { client.shutdown() }
        #expect(client.watchReadable(fd: fd, onReadable: { _ in false }) == nil)
    }
}
