import SpeakBridgeWebSocket
import Testing

/// A connection whose reading the server paused (`pauseReceiving`, the daemon's backpressure) leaves the peer's
/// PONGs unread in the kernel. Before 2026-12-07 lws's validity policy then hung it up `hangupAfter` seconds later
/// (close 1006, no close frame) although the peer answered every ping; now a paused connection is never hung up for
/// want of a sign of life, and the usual policy applies again from the resume on.
@Suite("WebSocket: liveness while reading is paused")
struct PausedLivenessTests {
    static var fastLiveness: WebSocketServerConfiguration {
        var configuration = Loopback.patientConfiguration
        configuration.pingInterval = 2
        configuration.hangupAfter = 4
        return configuration
    }

    static func client(pingInterval: Int, hangupAfter: Int) -> WebSocketClientConfiguration {
        var configuration = WebSocketClientConfiguration()
        configuration.pingInterval = pingInterval
        configuration.hangupAfter = hangupAfter
        return configuration
    }

    @Test func aPausedConnectionIsNotHungUpAndResumesNormally() async throws {
        // The client's own liveness out of the way (the next test is about it): what is tested is the server's.
        let link = try Loopback(configuration: Self.fastLiveness,
                                clientConfiguration: Self.client(pingInterval: 600, hangupAfter: 1_200))
        defer { link.shutdown() }
        let (id, serverSide) = try await link.connectAuthenticated()
        let (server, serverLog, client, log) = (link.server, link.serverLog, link.client, link.log)

        server.pauseReceiving(serverSide)
        client.send([1, 2, 3], on: id)  // waits in the kernel while the server does not read
        // More than twice `hangupAfter`: the old code dropped the connection 4 s after the pause.
        try await Task.sleep(for: .milliseconds(9_000))
        #expect(serverLog.closedReason(serverSide) == nil, "hung up while paused")
        #expect(log.closedReason(id) == nil)
        #expect(serverLog.messages(serverSide).isEmpty, "read while paused")

        server.resumeReceiving(serverSide)
        #expect(await serverLog.wait(timeout: .seconds(10)) { serverLog.messages(serverSide, $0) == [[1, 2, 3]] })
        // Reading again, the peer's PONGs count: still open after more than `hangupAfter`.
        try await Task.sleep(for: .milliseconds(5_000))
        #expect(serverLog.closedReason(serverSide) == nil && log.closedReason(id) == nil)

        // And the usual policy is back: a peer that stops reading (so answers no ping) is hung up.
        client.receiveLazily(id, true)
        let reason = await serverLog.waitClosed(serverSide, timeout: .seconds(20))
        #expect(reason != nil, "a silent peer of a resumed connection was never hung up")
    }

    /// The client's side of a pause: its PINGs wait unread behind its data, so an lws client with the usual policy
    /// (a PONG within `hangupAfter`) hung up a connection the server had only paused, 4 s in here (the reference
    /// `send`: 30 s, then it reconnected and resent its window into the same pause). The server now sends an
    /// unsolicited PONG at the pause and every quarter of its hang-up time: the client stays.
    @Test func theClientOfAPausedConnectionDoesNotHangUp() async throws {
        let link = try Loopback(configuration: Self.fastLiveness,
                                clientConfiguration: Self.client(pingInterval: 2, hangupAfter: 4))
        defer { link.shutdown() }
        let (id, serverSide) = try await link.connectAuthenticated()
        let (server, serverLog, client, log) = (link.server, link.serverLog, link.client, link.log)

        server.pauseReceiving(serverSide)
        client.send([4, 5, 6], on: id)
        try await Task.sleep(for: .milliseconds(9_000))
        #expect(log.closedReason(id) == nil, "the client hung up a paused connection: \(log.closedReason(id) ?? "")")
        #expect(serverLog.closedReason(serverSide) == nil)

        server.resumeReceiving(serverSide)
        #expect(await serverLog.wait(timeout: .seconds(10)) { serverLog.messages(serverSide, $0) == [[4, 5, 6]] })
        // Both sides' usual policy again: pings answered, nobody hangs up.
        try await Task.sleep(for: .milliseconds(5_000))
        #expect(serverLog.closedReason(serverSide) == nil && log.closedReason(id) == nil)
    }
}
