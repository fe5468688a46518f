import Dispatch
import SpeakBridgeSupport
import Testing
@testable import SpeakBridgeWebSocket

/// The server's side of the direct write: a frame for a connection with nothing queued ahead of it (an ack, a resume
/// answer) is written in the loop turn that produced it — from another thread through the inbox's wake-up, or from
/// inside an event handler on the service thread — with no WRITEABLE round trip; behind a client that stops reading,
/// frames queue as before, in order, within the queue's bound.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct ServerDirectWriteTests {
    /// Sends from another thread (as the committer sends acks), one at a time: each is written at once and arrives
    /// in order.
    @Test func framesToAFreeConnectionAreWrittenAtOnce() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (id, serverSide) = try await link.connectAuthenticated()
        await DirectWriteFlow.serverToClient(link, client: id, server: serverSide).framesGoOutAtOnce(count: 20)
    }

    /// A reply sent from inside the event handler (on the service thread, as a resume answer is) goes out in the
    /// same loop turn too.
    @Test func repliesFromTheEventHandlerAreWrittenAtOnce() async throws {
        let echo = try EchoServer(configuration: Loopback.patientConfiguration)
        defer { echo.shutdown() }
        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        defer { client.shutdown() }
        let id = try await connectClient(client, log, port: echo.port)
        let before = echo.server.directWriteCount
        let count = 10
        for index in 0..<count {
            client.send(numbered(index), on: id)
            #expect(await log.wait { log.messages(id, $0).count == index + 1 })
        }
        #expect(echo.server.directWriteCount - before == count)
        #expect(log.messages(id).map(number) == Array(0..<count))
    }

    /// A client that stops reading: the socket fills, lws keeps the rest of a frame, later frames wait in the
    /// server's queue; once the client reads again everything arrives exactly once, in order, and the next frame
    /// finds the connection free again.
    @Test func framesBehindAFullSocketQueueAndKeepTheirOrder() async throws {
        var configuration = Loopback.patientConfiguration
        configuration.maxQueuedBytes = 64 << 20  // holds all of them: this test is about order, not the bound
        let link = try Loopback(configuration: configuration)
        defer { link.shutdown() }
        let (id, serverSide) = try await link.connectAuthenticated()
        try await DirectWriteFlow.serverToClient(link, client: id, server: serverSide).framesQueueBehindAFullSocket()
    }
}
