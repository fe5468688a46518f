import Testing
import SpeakBridgeWebSocket

/// Messages between a real server and a real client over 127.0.0.1.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct MessagingTests {
    @Test func echoRoundTrip() async throws {
        let echo = try EchoServer()
        defer { echo.shutdown() }
        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        defer { client.shutdown() }

        let id = try await connectClient(client, log, port: echo.port)
        let serverOpened = await echo.log.wait { !echo.log.openedIDs($0).isEmpty }
        #expect(serverOpened)
        guard case let .opened(_, path, remote)? = echo.log.all.first else {
            Issue.record("server reported no .opened first")
            return
        }
        #expect(path == "/speakbridge.v1/session")
        #expect(remote == "127.0.0.1")
        guard case let .opened(_, clientPath, clientRemote)? = log.all.first else {
            Issue.record("client reported no .opened first")
            return
        }
        #expect(clientPath == "/speakbridge.v1/session")
        #expect(clientRemote == "127.0.0.1")

        let messages: [[UInt8]] = [[1, 2, 3], [], Array(repeating: 0x5A, count: 5000), [0xFF]]
        for message in messages {
            client.send(message, on: id)
        }
        let echoed = await log.wait { log.messages(id, $0).count == messages.count }
        #expect(echoed)
        #expect(log.messages(id) == messages)
    }

    @Test func tenThousandMessagesArriveInOrderBothWays() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (server, serverLog, client, log) = (link.server, link.serverLog, link.client, link.log)
        let (id, serverSide) = try await link.connectAuthenticated()

        let count = 10_000
        let clock = ContinuousClock()
        let start = clock.now
        for index in 0..<count {
            client.send(numbered(index, size: 16), on: id)
            server.send(numbered(index, size: 16), to: serverSide)
        }
        let arrived = await serverLog.wait(timeout: .seconds(30)) { serverLog.messages(serverSide, $0).count == count }
        let returned = await log.wait(timeout: .seconds(30)) { log.messages(id, $0).count == count }
        let elapsed = clock.now - start
        #expect(arrived && returned)
        #expect(serverLog.messages(serverSide).map(number) == Array(0..<count))
        #expect(log.messages(id).map(number) == Array(0..<count))
        print("2 × \(count) messages of 16 B in \(elapsed)")
    }

    @Test func burstOfLargeMessagesArrivesInOrder() async throws {
        // The whole burst is queued at once: a queue bound above it (this test is about partial writes, not the
        // bound, which OutgoingBoundTests covers).
        var configuration = Loopback.patientConfiguration
        configuration.maxQueuedBytes = 32 << 20
        let link = try Loopback(configuration: configuration)
        defer { link.shutdown() }
        let (server, log) = (link.server, link.log)
        let (id, serverSide) = try await link.connectAuthenticated()

        // 300 × 65,535 B ≈ 20 MB: far more than the socket buffers hold, so lws has to
        // buffer partial writes and the writer has to wait for WRITEABLE again.
        let count = 300
        let clock = ContinuousClock()
        let start = clock.now
        for index in 0..<count {
            server.send(numbered(index, size: 65_535), to: serverSide)
        }
        #expect(await log.wait(timeout: .seconds(30)) { log.messages(id, $0).count == count })
        print("\(count) messages of 65,535 B in \(clock.now - start)")
        let received = log.messages(id)
        #expect(received.map(number) == Array(0..<count))
        #expect(received.allSatisfy { $0.count == 65_535 && $0.last == 0xAB })
    }

    @Test func messagesQueuedBeforeOpenAreSent() async throws {
        let echo = try EchoServer()
        defer { echo.shutdown() }
        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        defer { client.shutdown() }
        let id = client.connect(host: "127.0.0.1", port: echo.port, path: "/speakbridge.v1/pair")
        client.send([7], on: id)
        client.send([8], on: id)
        #expect(await log.wait { log.messages(id, $0).count == 2 })
        #expect(log.messages(id) == [[7], [8]])
    }

    @Test func closeWithCodeReachesThePeer() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (server, serverLog, client, log) = (link.server, link.serverLog, link.client, link.log)

        let first = try await link.connect()
        client.send([1], on: first)
        client.close(first, code: 4001, reason: "bye")
        #expect(await serverLog.wait { events in
            events.contains { if case .closed = $0 { true } else { false } }
        })
        let serverFirst = try #require(serverLog.openedIDs().first)
        #expect(serverLog.messages(serverFirst) == [[1]], "a message queued before close goes out first")
        #expect(serverLog.closedReason(serverFirst) == "peer close 4001: bye")
        #expect(await log.waitClosed(first) == "local close 4001: bye")

        let second = try await connectClient(client, log, port: server.port)
        #expect(await serverLog.wait { serverLog.openedIDs($0).count == 2 })
        let serverSecond = serverLog.openedIDs()[1]
        server.close(serverSecond, code: 4002, reason: "server says bye")
        #expect(await log.waitClosed(second) == "peer close 4002: server says bye")
        #expect(await serverLog.waitClosed(serverSecond) == "local close 4002: server says bye")
    }

    @Test func severalConnectionsOnOneClient() async throws {
        let echo = try EchoServer()
        defer { echo.shutdown() }
        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        defer { client.shutdown() }
        let ids = (0..<5).map { _ in client.connect(host: "127.0.0.1", port: echo.port, path: "/speakbridge.v1/session") }
        for (index, id) in ids.enumerated() {
            client.send([UInt8(index)], on: id)
        }
        #expect(await log.wait { events in ids.allSatisfy { log.messages($0, events).count == 1 } })
        for (index, id) in ids.enumerated() {
            #expect(log.messages(id) == [[UInt8(index)]])
        }
    }
}
