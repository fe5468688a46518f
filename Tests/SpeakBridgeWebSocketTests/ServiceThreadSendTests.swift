import SpeakBridgeSupport
import Synchronization
import Testing
@testable import SpeakBridgeWebSocket
#if canImport(Glibc)
import Glibc
#endif

/// `send` on the service thread is applied at once only when nothing is queued ahead of it (`ServiceLoop.send`), and
/// a connection's lookup remembers the last one found (`ServiceLoop.connection`) only while it exists.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct ServiceThreadSendTests {
    /// Runs `body` once on the service thread, inside a callback (a watched pipe's readable), as `send`'s stdin
    /// handler does, and waits until it ran.
    static func onServiceThread(_ client: WebSocketClient, _ body: @escaping @Sendable () -> Void) async throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        let (readEnd, writeEnd) = (ends[0], ends[1])
        defer { close(readEnd) }
        let ran = Atomic<Bool>(false)
        let watch = client.watchReadable(fd: readEnd) { _ in
            var byte: UInt8 = 0
            _ = read(readEnd, &byte, 1)
            body()
            ran.store(true, ordering: .releasing)
            return false  // one call
        }
        #expect(watch != nil)
        var byte: UInt8 = 0x78
        #expect(write(writeEnd, &byte, 1) == 1)
        close(writeEnd)
        for _ in 0..<2_000 where !ran.load(ordering: .acquiring) {
            try await Task.sleep(for: .milliseconds(5))
        }
        let done = ran.load(ordering: .acquiring)
        #expect(done, "the callback ran")
    }

    /// In one callback: a frame (nothing ahead of it: written at once), a close (a command, queued), another frame.
    /// The last one stays behind the close queued before it, so it is dropped with the closing connection: had it
    /// gone out at once, the server would have received it before the close.
    @Test func aFrameStaysBehindACommandQueuedBeforeIt() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (id, serverSide) = try await link.connectAuthenticated()
        let client = link.client
        let before = client.directWriteCount
        try await Self.onServiceThread(client) {
            client.send([1], on: id)
            client.close(id, code: 4001, reason: "test")
            client.send([2], on: id)
        }
        #expect(await link.serverLog.waitClosed(serverSide) != nil)
        #expect(link.serverLog.messages(serverSide) == [[1]])
        #expect(client.directWriteCount - before == 1, "the first frame was written in that callback")
    }

    /// Several frames in one callback with nothing queued: each goes out at once, in order.
    @Test func framesFromOneCallbackKeepTheirOrder() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (id, serverSide) = try await link.connectAuthenticated()
        let client = link.client
        try await Self.onServiceThread(client) {
            for index in 0..<50 { client.send(numbered(index), on: id) }
        }
        #expect(await link.serverLog.wait { link.serverLog.messages(serverSide, $0).count == 50 })
        #expect(link.serverLog.messages(serverSide).map(number) == Array(0..<50))
    }

    /// A connection that closed is not found any more, though it was the last one found: a frame sent to its ID
    /// later (from the service thread too) is dropped, and the next connection gets its own frames.
    @Test func aClosedConnectionIsNotFoundAgain() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (first, firstServer) = try await link.connectAuthenticated()
        let client = link.client
        try await Self.onServiceThread(client) { client.send([1], on: first) }  // the last one found: `first`
        #expect(await link.serverLog.wait { link.serverLog.messages(firstServer, $0) == [[1]] })
        client.close(first)
        #expect(await link.log.waitClosed(first) != nil)
        #expect(await link.serverLog.waitClosed(firstServer) != nil)
        // Read on the service thread, whose variable it is: the closed connection is not the one remembered.
        let remembered = Locked<WebSocketConnectionID?>(nil)
        try await Self.onServiceThread(client) { remembered.withLock { $0 = client.loop.lastFound?.id } }
        #expect(remembered.withLock { $0 } != first, "a connection that is gone is still remembered")
        try await Self.onServiceThread(client) { client.send([9], on: first) }
        let (second, secondServer) = try await link.connectAuthenticated()
        try await Self.onServiceThread(client) {
            client.send([9], on: first)
            client.send([2], on: second)
        }
        #expect(await link.serverLog.wait { link.serverLog.messages(secondServer, $0) == [[2]] })
        #expect(link.serverLog.messages(firstServer) == [[1]])
        #expect(link.log.closedReason(second) == nil, "the second connection is still open")
    }
}
