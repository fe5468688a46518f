import Dispatch
import SpeakBridgeSupport
import Testing
import SpeakBridgeWebSocket

/// Frames leave in the order they were enqueued, whatever thread enqueued them; receiving can be paused.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct OrderAndFlowTests {
    /// Issue 8 row 12: one sender on the service thread (inside onEvent, answering the client's ticks) and two
    /// on other threads, all numbering their sends from one counter taken under one lock together with the
    /// send call, as a caller that encrypts and sends under its own lock does. The client must see the numbers
    /// strictly increasing: any other order is a frame overtaking one enqueued before it.
    @Test func sendsFromTheServiceThreadAndOtherThreadsKeepTheirOrder() async throws {
        let counter = Locked<Int>(0)
        let serverLog = EventLog()
        let reference = Locked<WebSocketServer?>(nil)
        let server = try WebSocketServer(configuration: WebSocketServerConfiguration()) { event in
            serverLog.handler(event)
            guard let server = reference.value else { return }
            switch event {
            case let .opened(id, _, _):
                server.markAuthenticated(id)
            case let .message(id, _):
                counter.withLock { value in
                    value += 1
                    server.send(numbered(value), to: id)
                }
            case .closed:
                break
            }
        }
        reference.value = server
        defer {
            server.shutdown()
            reference.value = nil
        }
        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        defer { client.shutdown() }
        let id = try await connectClient(client, log, port: server.port)
        #expect(await serverLog.wait { serverLog.openedIDs($0).count == 1 })
        let serverSide = try #require(serverLog.openedIDs().first)

        let ticks = 10_000
        let perThread = 10_000
        let group = DispatchGroup()
        for _ in 0..<2 {
            DispatchQueue.global().async(group: group) {
                for _ in 0..<perThread {
                    counter.withLock { value in
                        value += 1
                        server.send(numbered(value), to: serverSide)
                    }
                }
            }
        }
        for _ in 0..<ticks { client.send([0], on: id) }
        group.wait()
        let total = ticks + 2 * perThread
        #expect(await log.wait(timeout: .seconds(20)) { log.messages(id, $0).count >= total })
        let numbers = log.messages(id).map(number)
        #expect(numbers.count == total)
        var inversions = 0
        for (previous, next) in zip(numbers, numbers.dropFirst()) where next <= previous { inversions += 1 }
        #expect(inversions == 0, "\(inversions) frames overtook one enqueued before them")
    }

    /// The same on the client side (the CLI's stdin thread and its lws thread both send on one connection).
    @Test func clientSendsFromItsServiceThreadAndOtherThreadsKeepTheirOrder() async throws {
        let counter = Locked<Int>(0)
        let echo = try EchoServer()  // echoes the numbered messages back, in the order they arrived
        defer { echo.shutdown() }
        let log = EventLog()
        let reference = Locked<WebSocketClient?>(nil)
        let ticks = Locked<Int>(0)
        let client = try WebSocketClient { event in
            log.handler(event)
            // Every echo that comes back makes the service thread send one more numbered message.
            guard case let .message(id, _) = event, let client = reference.value else { return }
            let more = ticks.withLock { value in
                value += 1
                return value <= 10_000
            }
            guard more else { return }
            counter.withLock { value in
                value += 1
                client.send(numbered(value), on: id)
            }
        }
        reference.value = client
        defer {
            client.shutdown()
            reference.value = nil
        }
        let id = try await connectClient(client, log, port: echo.port)
        let group = DispatchGroup()
        for _ in 0..<2 {
            DispatchQueue.global().async(group: group) {
                for _ in 0..<6_000 {
                    counter.withLock { value in
                        value += 1
                        client.send(numbered(value), on: id)
                    }
                }
            }
        }
        group.wait()
        let total = 12_000 + 10_000
        #expect(await log.wait(timeout: .seconds(20)) { log.messages(id, $0).count >= total })
        let numbers = log.messages(id).map(number)
        #expect(numbers.count == total)
        var inversions = 0
        for (previous, next) in zip(numbers, numbers.dropFirst()) where next <= previous { inversions += 1 }
        #expect(inversions == 0, "\(inversions) frames overtook one enqueued before them")
    }

    /// pauseReceiving: nothing the peer sends meanwhile is delivered; after resumeReceiving all of it is, in order.
    @Test func pausedConnectionDeliversNothingUntilResumedThenEverythingInOrder() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (id, serverSide) = try await link.connectAuthenticated()
        let (server, serverLog, client, log) = (link.server, link.serverLog, link.client, link.log)

        server.pauseReceiving(serverSide)
        // Commands run in order, so once this marker arrives the pause is in effect.
        server.send([0xFF], to: serverSide)
        #expect(await log.wait { log.messages(id, $0) == [[0xFF]] })

        let count = 500
        for index in 0..<count { client.send(numbered(index, size: 512), on: id) }
        try await Task.sleep(for: .milliseconds(500))
        #expect(serverLog.messages(serverSide).isEmpty, "delivered while paused")

        server.resumeReceiving(serverSide)
        #expect(await serverLog.wait { serverLog.messages(serverSide, $0).count == count })
        #expect(serverLog.messages(serverSide).map(number) == Array(0..<count))

        // Pausing and resuming again keeps working.
        server.pauseReceiving(serverSide)
        server.send([0xFE], to: serverSide)
        #expect(await log.wait { log.messages(id, $0).count == 2 })
        client.send([7], on: id)
        try await Task.sleep(for: .milliseconds(200))
        #expect(serverLog.messages(serverSide).count == count)
        server.resumeReceiving(serverSide)
        #expect(await serverLog.wait { serverLog.messages(serverSide, $0).last == [7] })
    }
}

/// A peer that keeps a connection open but never reads cannot make the server buffer without bound.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct OutgoingBoundTests {
    /// A raw client upgrades and then never reads; the server queues 60 KiB replies to it. Once the kernel's
    /// socket buffers are full they pile up in the connection's queue: past `maxQueuedBytes` the connection is
    /// closed ("not reading") instead of growing (before: the queue grew with every send until hang-up).
    @Test func peerThatDoesNotReadIsClosedAtTheQueueBound() async throws {
        var configuration = Loopback.patientConfiguration
        configuration.maxQueuedBytes = 256 << 10
        let log = EventLog()
        let server = try WebSocketServer(configuration: configuration, onEvent: log.handler)
        defer { server.shutdown() }
        let raw = try RawWebSocket(port: server.port)
        #expect(httpStatus(raw.upgrade()) == 101)
        #expect(await log.wait { log.openedIDs($0).count == 1 })
        let id = try #require(log.openedIDs().first)
        server.markAuthenticated(id)
        let reply = [UInt8](repeating: 0x41, count: 60 << 10)
        // 64 MiB in all: far more than loopback socket buffers hold, so without a bound all of it would queue.
        for _ in 0..<1_024 { server.send(reply, to: id) }
        let reason = await log.waitClosed(id, timeout: .seconds(20))
        #expect(reason?.contains("not reading") == true, "closed: \(reason ?? "not closed")")
    }

    /// Two raw connections of one group (one device's) that never read: each stays far below its own bound
    /// (16 MiB sent to each, the bound 64 MiB), but together they pass the group's 4 MiB, and the connection whose
    /// send would take the group over is closed ("not reading"). Before, each connection had only its own bound:
    /// a device with 8 connections that read nothing held 8 × 16 MiB of the daemon's memory.
    @Test func connectionsOfOneGroupThatDoNotReadAreClosedAtTheGroupBound() async throws {
        var configuration = Loopback.patientConfiguration
        configuration.maxQueuedBytes = 64 << 20
        configuration.maxQueuedBytesPerGroup = 4 << 20
        let log = EventLog()
        let server = try WebSocketServer(configuration: configuration, onEvent: log.handler)
        defer { server.shutdown() }
        let raws = try (0..<2).map { _ in try RawWebSocket(port: server.port) }
        for raw in raws { #expect(httpStatus(raw.upgrade()) == 101) }
        #expect(await log.wait { log.openedIDs($0).count == 2 })
        let ids = log.openedIDs()
        for id in ids { server.markAuthenticated(id, group: "device") }
        let reply = [UInt8](repeating: 0x41, count: 60 << 10)
        // 16 MiB to each, alternately: more than the loopback socket buffers hold, far below each one's own bound.
        for _ in 0..<273 { for id in ids { server.send(reply, to: id) } }
        _ = await log.wait(timeout: .seconds(20)) { events in ids.contains { log.closedReason($0, events) != nil } }
        let reasons = ids.compactMap { log.closedReason($0) }
        #expect(reasons.contains { $0.contains("not reading") }, "closed: \(reasons)")
    }

    /// The client side: a server that stops reading (here its own rx flow control, as a compromised desktop could
    /// while asking for more) cannot make a client buffer without bound either. Before, a client connection's
    /// queue had no bound.
    @Test func aClientWhoseServerDoesNotReadIsClosedAtTheQueueBound() async throws {
        let serverLog = EventLog()
        let server = try WebSocketServer(configuration: Loopback.patientConfiguration, onEvent: serverLog.handler)
        defer { server.shutdown() }
        var configuration = WebSocketClientConfiguration()
        configuration.maxQueuedBytes = 256 << 10
        let log = EventLog()
        let client = try WebSocketClient(configuration: configuration, onEvent: log.handler)
        defer { client.shutdown() }
        let id = try await connectClient(client, log, port: server.port)
        #expect(await serverLog.wait { serverLog.openedIDs($0).count == 1 })
        let serverID = try #require(serverLog.openedIDs().first)
        server.markAuthenticated(serverID)
        server.pauseReceiving(serverID)
        let message = [UInt8](repeating: 0x41, count: 60 << 10)
        for _ in 0..<1_024 { client.send(message, on: id) }  // 60 MiB: far past the kernel's buffers
        let reason = await log.waitClosed(id, timeout: .seconds(20))
        #expect(reason?.contains("not reading") == true, "closed: \(reason ?? "not closed")")
    }

    @Test func queueBoundBelowTheMessageSizeIsRefused() {
        var configuration = WebSocketServerConfiguration()
        configuration.maxQueuedBytes = configuration.maxMessageSize - 1
        #expect(throws: WebSocketError.self) { _ = try WebSocketServer(configuration: configuration) { _ in } }
    }
}
