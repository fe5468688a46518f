import SpeakBridgeSupport
import Synchronization
import Testing
import SpeakBridgeWebSocket
#if canImport(Glibc)
import Glibc
#endif

/// Starting, binding, failing to connect, idling and shutting down.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct LifecycleTests {
    @Test func connectingToAClosedPortClosesQuickly() async throws {
        let port = try unusedPort()
        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        defer { client.shutdown() }
        let clock = ContinuousClock()
        let start = clock.now
        let id = client.connect(host: "127.0.0.1", port: port, path: "/speakbridge.v1/session", timeout: 60)
        let reason = try #require(await log.waitClosed(id, timeout: .seconds(60)))
        let elapsed = clock.now - start
        #expect(reason.hasPrefix("connect failed"))
        // Refused at once, not after the 60 s connect timeout (generous bound: the machine is shared).
        #expect(elapsed < .seconds(30), "took \(elapsed)")
        #expect(log.all.count == 1)
    }

    @Test func silentServerTimesOut() async throws {
        // A socket that listens but never accepts: the kernel completes the TCP handshake,
        // nobody answers the upgrade.
        let (listener, port) = try loopbackSocket(listenBacklog: 4)
        defer { close(listener) }

        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        defer { client.shutdown() }
        let clock = ContinuousClock()
        let start = clock.now
        let id = client.connect(host: "127.0.0.1", port: port, path: "/speakbridge.v1/session", timeout: 1)
        #expect(await log.waitClosed(id, timeout: .seconds(30)) == "connect timeout")
        let elapsed = clock.now - start
        // The upper bound only catches "never timed out" (a sanitizer build on a loaded machine is slow).
        #expect(elapsed >= .milliseconds(900) && elapsed < .seconds(30), "took \(elapsed)")
    }

    @Test func shutdownClosesOpenConnections() async throws {
        let echo = try EchoServer()
        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        defer { client.shutdown() }
        let first = try await connectClient(client, log, port: echo.port)
        let second = try await connectClient(client, log, port: echo.port)
        #expect(await echo.log.wait { echo.log.openedIDs($0).count == 2 })

        let clock = ContinuousClock()
        let start = clock.now
        echo.shutdown()
        let elapsed = clock.now - start
        let serverEvents = echo.log.all
        for id in echo.log.openedIDs(serverEvents) {
            #expect(echo.log.closedReason(id, serverEvents) == "local close 1001: shutdown")
        }
        #expect(elapsed < .seconds(10), "shutdown took \(elapsed)")
        #expect(await log.waitClosed(first) == "peer close 1001: shutdown")
        #expect(await log.waitClosed(second) == "peer close 1001: shutdown")

        echo.shutdown()  // idempotent
        echo.server.send([1], to: echo.log.openedIDs()[0])  // dropped, not a crash
        try await Task.sleep(for: .milliseconds(200))
        #expect(echo.log.all.count == serverEvents.count, "no events after shutdown returned")
    }

    @Test func clientShutdownReportsEveryConnection() async throws {
        let echo = try EchoServer()
        defer { echo.shutdown() }
        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        let open = try await connectClient(client, log, port: echo.port)
        let pending = client.connect(host: "127.0.0.1", port: try unusedPort(), path: "/x", timeout: 30)
        client.shutdown()
        let events = log.all
        #expect(log.closedReason(open, events) != nil)
        #expect(log.closedReason(pending, events) != nil)
        let late = client.connect(host: "127.0.0.1", port: echo.port, path: "/speakbridge.v1/session")
        try await Task.sleep(for: .milliseconds(200))
        #expect(log.closedReason(late) == nil, "no events after shutdown")
        #expect(log.all.count == events.count)
    }

    @Test func shutdownFromInsideTheHandlerDoesNotDeadlock() async throws {
        let reference = Locked<WebSocketServer?>(nil)
        let log = EventLog()
        // The patient pre-authentication deadline: the connection is never marked authenticated, and on a loaded
        // machine its message came after the default 5 s (the client then saw 1008 "handshake timeout").
        let server = try WebSocketServer(configuration: Loopback.patientConfiguration) { event in
            log.handler(event)
            if case .message = event {
                reference.value?.shutdown()
            }
        }
        reference.value = server
        let clientLog = EventLog()
        let client = try WebSocketClient(onEvent: clientLog.handler)
        defer { client.shutdown() }
        let id = try await connectClient(client, clientLog, port: server.port)
        client.send([1], on: id)
        #expect(await clientLog.waitClosed(id) == "peer close 1001: shutdown")
        server.shutdown()
        reference.value = nil
    }

    @Test func deadPeerIsNoticedAndLivePeerIsKept() async throws {
        var configuration = WebSocketServerConfiguration()
        configuration.pingInterval = 1
        configuration.hangupAfter = 2
        let serverLog = EventLog()
        let server = try WebSocketServer(configuration: configuration, onEvent: serverLog.handler)
        defer { server.shutdown() }

        // The raw socket never answers PINGs: a dead peer as far as the server can tell.
        let raw = try RawWebSocket(port: server.port)
        #expect(raw.upgrade().hasPrefix("HTTP/1.1 101"))
        #expect(await serverLog.wait { serverLog.openedIDs($0).count == 1 })
        let silent = serverLog.openedIDs()[0]
        server.markAuthenticated(silent)

        var clientConfiguration = WebSocketClientConfiguration()
        clientConfiguration.pingInterval = 1
        clientConfiguration.hangupAfter = 2
        let log = EventLog()
        let client = try WebSocketClient(configuration: clientConfiguration, onEvent: log.handler)
        defer { client.shutdown() }
        let live = try await connectClient(client, log, port: server.port)
        #expect(await serverLog.wait { serverLog.openedIDs($0).count == 2 })
        server.markAuthenticated(serverLog.openedIDs()[1])

        let clock = ContinuousClock()
        let start = clock.now
        #expect(await serverLog.waitClosed(silent, timeout: .seconds(30)) != nil)
        let elapsed = clock.now - start
        #expect(elapsed < .seconds(15), "dead peer noticed after \(elapsed)")
        try await Task.sleep(for: .seconds(1))
        #expect(log.closedReason(live) == nil, "a peer that answers PINGs stays connected")
        #expect(serverLog.closedReason(serverLog.openedIDs()[1]) == nil)
    }

    @Test func ephemeralPortsDiffer() throws {
        let a = try WebSocketServer(configuration: WebSocketServerConfiguration()) { _ in }
        defer { a.shutdown() }
        let b = try WebSocketServer(configuration: WebSocketServerConfiguration()) { _ in }
        defer { b.shutdown() }
        #expect(a.port > 0 && b.port > 0)
        #expect(a.port != b.port)
    }

    @Test func bindingAPortInUseThrows() throws {
        let first = try WebSocketServer(configuration: WebSocketServerConfiguration()) { _ in }
        defer { first.shutdown() }
        var configuration = WebSocketServerConfiguration()
        configuration.port = first.port
        #expect {
            _ = try WebSocketServer(configuration: configuration) { _ in }
        } throws: { error in
            guard case let .bindFailed(host, port, reason)? = error as? WebSocketError else { return false }
            print("bindFailed reason: \(reason)")
            return host == "127.0.0.1" && port == first.port && reason.hasPrefix("Address already in use")
        }
    }

    @Test func bindingAnAddressNotOnThisHostThrows() throws {
        var configuration = WebSocketServerConfiguration()
        configuration.host = "192.0.2.1"  // TEST-NET-1: never assigned here; nothing is sent
        #expect {
            _ = try WebSocketServer(configuration: configuration) { _ in }
        } throws: { error in
            guard case let .bindFailed(_, _, reason)? = error as? WebSocketError else { return false }
            print("bindFailed reason: \(reason)")
            return true
        }
    }

    @Test func invalidConfigurationThrows() {
        var badHost = WebSocketServerConfiguration()
        badHost.host = "localhost"
        var badLiveness = WebSocketServerConfiguration()
        badLiveness.hangupAfter = badLiveness.pingInterval
        for configuration in [badHost, badLiveness] {
            #expect {
                _ = try WebSocketServer(configuration: configuration) { _ in }
            } throws: { error in
                if case .invalidConfiguration? = error as? WebSocketError { true } else { false }
            }
        }
    }

    @Test func serviceThreadSleepsWhenIdle() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (server, serverLog, client, log) = (link.server, link.serverLog, link.client, link.log)
        let (id, _) = try await link.connectAuthenticated()
        client.send([1], on: id)
        #expect(await serverLog.wait { !serverLog.messages(serverLog.openedIDs($0)[0], $0).isEmpty })

        #expect(threadName(server.serviceThreadID) == "sb-ws-server")
        #expect(threadName(client.serviceThreadID) == "sb-ws-client")
        try await Task.sleep(for: .milliseconds(100))
        let serverBefore = try threadCPUTicks(server.serviceThreadID)
        let clientBefore = try threadCPUTicks(client.serviceThreadID)
        try await Task.sleep(for: .seconds(2))
        let serverTicks = try threadCPUTicks(server.serviceThreadID) - serverBefore
        let clientTicks = try threadCPUTicks(client.serviceThreadID) - clientBefore
        // A tick is 10 ms; a busy loop would burn about 200 in 2 s.
        #expect(serverTicks <= 2, "server service thread used \(serverTicks) ticks while idle")
        #expect(clientTicks <= 2, "client service thread used \(clientTicks) ticks while idle")
        #expect(log.closedReason(id) == nil)
    }

    @Test func writingToABrokenConnectionDoesNotRaiseSIGPIPE() async throws {
        let serverLog = EventLog()
        let server = try WebSocketServer(configuration: WebSocketServerConfiguration(), onEvent: serverLog.handler)
        defer { server.shutdown() }

        // Measured: lws_create_context sets SIGPIPE to SIG_IGN for the whole process.
        var current = sigaction()
        sigaction(SIGPIPE, nil, &current)
        #expect(unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == 1, "SIGPIPE ignored")

        // Put SIGPIPE back to its default action (terminate) for the rest of the test, so
        // that a send() without MSG_NOSIGNAL kills the test process.
        var defaultAction = sigaction()
        var saved = sigaction()
        sigaction(SIGPIPE, &defaultAction, &saved)
        defer { sigaction(SIGPIPE, &saved, nil) }

        // 1. A deterministic EPIPE: shut down the write side of the server's own socket, so
        //    its next send() fails with EPIPE, which raises SIGPIPE unless MSG_NOSIGNAL is used.
        let raw = try RawWebSocket(port: server.port)
        #expect(raw.upgrade().hasPrefix("HTTP/1.1 101"))
        #expect(await serverLog.wait { serverLog.openedIDs($0).count == 1 })
        let serverSocket = try #require(acceptedSocket(listeningPort: server.port, peerPort: raw.localPort))
        #expect(shutdown(serverSocket, Int32(SHUT_WR)) == 0)
        let first = serverLog.openedIDs()[0]
        server.send([1, 2, 3], to: first)
        #expect(await serverLog.waitClosed(first) != nil)

        // 2. A peer that vanishes (RST) while the server has megabytes queued for it.
        var vanishing: RawWebSocket? = try RawWebSocket(port: server.port)
        #expect(vanishing?.upgrade().hasPrefix("HTTP/1.1 101") == true)
        #expect(await serverLog.wait { serverLog.openedIDs($0).count == 2 })
        let second = serverLog.openedIDs()[1]
        for _ in 0..<1000 {
            server.send([UInt8](repeating: 3, count: 10_000), to: second)
        }
        try await Task.sleep(for: .milliseconds(50))
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(vanishing!.fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        vanishing = nil
        for _ in 0..<100 {
            server.send([UInt8](repeating: 4, count: 10_000), to: second)
        }
        #expect(await serverLog.waitClosed(second) != nil)
    }

    @Test func ipv6Loopback() async throws {
        guard ipv6LoopbackAvailable() else {
            print("note: no ::1 on this host; IPv6 test skipped")
            return
        }
        var configuration = WebSocketServerConfiguration()
        configuration.host = "::1"
        let serverLog = EventLog()
        let server = try WebSocketServer(configuration: configuration, onEvent: serverLog.handler)
        defer { server.shutdown() }
        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        defer { client.shutdown() }
        let id = client.connect(host: "::1", port: server.port, path: "/speakbridge.v1/pair")
        #expect(await log.waitOpened(id), "\(log.closedReason(id) ?? "")")
        #expect(await serverLog.wait { !serverLog.openedIDs($0).isEmpty })
        guard case let .opened(_, _, remote)? = serverLog.all.first else { return }
        #expect(remote == "::1")
    }

    @Test func lwsLogLinesReachTheHandler() {
        let lines = Locked<[String]>([])
        WebSocketLog.setHandler { level, text in
            if level == .warning { lines.value.append(text) }
        }
        defer { WebSocketLog.resetHandler() }
        WebSocketLog.emitThroughLibrary(.warning, "hello from the test")
        #expect(lines.value.contains("hello from the test"))
    }
}

/// The file descriptor of the server-side socket of one connection in this process:
/// the one bound to `listeningPort` whose peer is on `peerPort`.
private func acceptedSocket(listeningPort: Int, peerPort: Int) -> Int32? {
    for fd in Int32(3)..<Int32(4096) {
        var local = sockaddr_in()
        var peer = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let gotLocal = withUnsafeMutablePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard gotLocal, local.sin_family == sa_family_t(AF_INET),
              Int(UInt16(bigEndian: local.sin_port)) == listeningPort else { continue }
        length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let gotPeer = withUnsafeMutablePointer(to: &peer) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) == 0 }
        }
        if gotPeer, Int(UInt16(bigEndian: peer.sin_port)) == peerPort {
            return fd
        }
    }
    return nil
}

private func ipv6LoopbackAvailable() -> Bool {
    let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in6()
    address.sin6_family = sa_family_t(AF_INET6)
    address.sin6_addr = in6addr_loopback
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0
        }
    }
}
