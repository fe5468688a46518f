import Foundation
import Testing
@testable import SpeakBridgeWebSocket

/// Lazy receiving on a client connection (`receiveLazily`, `receivePending`), on a real server over loopback: what
/// the server sends waits until the client asks, then all of it comes, in order; a close is seen when asked too.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct LazyReceiveTests {
    /// A lazy client reads nothing until asked, so neither side hears the other's pings meanwhile: with the default
    /// 20 s / 30 s liveness, a test starved that long in a loaded full-suite run (seen: 134 s) had its connection
    /// hung up under it. Here liveness is not what is tested, so it waits ten minutes.
    static func patientLink() throws -> Loopback {
        var server = Loopback.patientConfiguration
        server.pingInterval = 600
        server.hangupAfter = 660
        var client = WebSocketClientConfiguration()
        client.pingInterval = 600
        client.hangupAfter = 660
        return try Loopback(configuration: server, clientConfiguration: client)
    }

    /// A connection of `link` made lazy: (client side, server side). Commands run in order, so once the marker frame
    /// sent after `receiveLazily` reached the server, the client is lazy.
    static func lazyConnection(_ link: Loopback) async throws -> (WebSocketConnectionID, WebSocketConnectionID) {
        let (id, serverSide) = try await link.connectAuthenticated()
        link.client.receiveLazily(id, true)
        link.client.send([0xFF], on: id)
        #expect(await link.serverLog.wait { link.serverLog.messages(serverSide, $0) == [[0xFF]] })
        return (id, serverSide)
    }

    /// Asks (`receivePending`) until `condition` holds on the client's events, every 50 ms for up to 30 s. An ask
    /// reads what the socket holds at that moment, so one ask right after the server was told to send can come
    /// before the bytes do (the server's thread may be starved on a loaded machine): an application asks again, as
    /// `send` does at its next line or timer, and so does the test.
    static func ask(_ link: Loopback, _ id: WebSocketConnectionID,
                    until condition: @escaping ([WebSocketEvent]) -> Bool) async -> Bool {
        let clock = ContinuousClock()
        let end = clock.now + .seconds(30)
        while clock.now < end {
            link.client.receivePending(id)
            if await link.log.wait(timeout: .milliseconds(50), until: condition) { return true }
        }
        return condition(link.log.all)
    }

    @Test func lazyConnectionReadsOnlyWhenAskedThenEverythingInOrder() async throws {
        let link = try Self.patientLink()
        defer { link.shutdown() }
        let (id, serverSide) = try await Self.lazyConnection(link)
        let (server, serverLog, client, log) = (link.server, link.serverLog, link.client, link.log)

        for index in 0..<3 { server.send(numbered(index), to: serverSide) }
        try await Task.sleep(for: .milliseconds(300))
        #expect(log.messages(id).isEmpty, "read while lazy and not asked")

        #expect(await Self.ask(link, id) { log.messages(id, $0).count == 3 })
        #expect(log.messages(id).map(number) == [0, 1, 2])

        // Back to lazy after the read: the next frame waits for the next ask.
        server.send(numbered(3), to: serverSide)
        try await Task.sleep(for: .milliseconds(300))
        #expect(log.messages(id).count == 3, "read again without being asked")
        #expect(await Self.ask(link, id) { log.messages(id, $0).count == 4 })

        // Asking with nothing there changes nothing, and the client still sends.
        client.receivePending(id)
        client.send([0xFE], on: id)
        #expect(await serverLog.wait { serverLog.messages(serverSide, $0).count == 2 })

        // Lazy off: frames come as they arrive again.
        client.receiveLazily(id, false)
        client.send([0xFD], on: id)
        #expect(await serverLog.wait { serverLog.messages(serverSide, $0).count == 3 })
        server.send(numbered(4), to: serverSide)
        #expect(await log.wait { log.messages(id, $0).count == 5 })
        #expect(log.messages(id).map(number) == [0, 1, 2, 3, 4])
    }

    @Test func closeByTheServerIsSeenAtTheNextAskAndNothingBeforeItIsLost() async throws {
        let link = try Self.patientLink()
        defer { link.shutdown() }
        let (id, serverSide) = try await Self.lazyConnection(link)
        let (server, log) = (link.server, link.log)
        server.send(numbered(7), to: serverSide)
        server.close(serverSide, code: 1001, reason: "going away")
        try await Task.sleep(for: .milliseconds(300))
        #expect(log.messages(id).isEmpty)
        #expect(log.closedReason(id) == nil, "the close was read while lazy")

        #expect(await Self.ask(link, id) { log.closedReason(id, $0) != nil })
        #expect(log.messages(id).map(number) == [7], "the frame before the close")
    }
}
