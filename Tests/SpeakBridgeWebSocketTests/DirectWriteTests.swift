import Dispatch
import SpeakBridgeSupport
import Testing
@testable import SpeakBridgeWebSocket

/// A client's frame with nothing ahead of it is written in the loop turn that sent it (no WRITEABLE round trip);
/// behind a socket that does not take more, frames queue as before and nothing overtakes anything.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct DirectWriteTests {
    /// A free connection: every frame goes out at once, and arrives, in order.
    @Test func framesOnAFreeConnectionAreWrittenAtOnce() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (id, serverSide) = try await link.connectAuthenticated()
        let before = link.client.directWriteCount
        let count = 20
        for index in 0..<count {
            link.client.send(numbered(index), on: id)
            // One at a time, as paced lines come: each finds the connection free.
            #expect(await link.serverLog.wait { link.serverLog.messages(serverSide, $0).count == index + 1 })
        }
        #expect(link.client.directWriteCount - before == count)
        #expect(link.serverLog.messages(serverSide).map(number) == Array(0..<count))
    }

    /// A peer that stops reading: the socket fills, lws keeps the rest of a frame, later frames wait in the queue
    /// (not written at once); once the peer reads again everything arrives exactly once, in order, and a frame
    /// sent after that finds the connection free again.
    @Test func framesBehindAFullSocketQueueAndKeepTheirOrder() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (id, serverSide) = try await link.connectAuthenticated()
        let (server, serverLog, client, log) = (link.server, link.serverLog, link.client, link.log)

        server.pauseReceiving(serverSide)
        server.send([0xFF], to: serverSide)  // commands run in order: once this arrives, the pause is in effect
        #expect(await log.wait { log.messages(id, $0) == [[0xFF]] })

        let before = client.directWriteCount
        // Far more than loopback's socket buffers hold (a few MB at most).
        let count = 600
        for index in 0..<count { client.send(numbered(index, size: 60_000), on: id) }
        try await Task.sleep(for: .milliseconds(300))
        let direct = client.directWriteCount - before
        #expect(direct >= 1, "the first frame found the connection free")
        #expect(direct < count, "every frame was written at once, although the peer read nothing")
        #expect(serverLog.messages(serverSide).isEmpty, "delivered while paused")

        server.resumeReceiving(serverSide)
        #expect(await serverLog.wait(timeout: .seconds(20)) { serverLog.messages(serverSide, $0).count >= count })
        #expect(serverLog.messages(serverSide).map(number) == Array(0..<count))

        // Drained: the next frame goes out at once again.
        let drained = client.directWriteCount
        client.send(numbered(count), on: id)
        #expect(await serverLog.wait { serverLog.messages(serverSide, $0).count == count + 1 })
        #expect(client.directWriteCount == drained + 1)
        #expect(serverLog.messages(serverSide).last.map(number) == count)
    }
}
