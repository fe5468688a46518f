import SpeakBridgeSupport
import Testing
import SpeakBridgeWebSocket
#if canImport(Glibc)
import Glibc
#endif

/// Records events from a server or client and lets a test wait for a condition on them.
final class EventLog: Sendable {
    private let events = Locked<[WebSocketEvent]>([])

    var handler: @Sendable (WebSocketEvent) -> Void {
        { [self] event in events.withLock { $0.append(event) } }
    }

    var all: [WebSocketEvent] { events.withLock { $0 } }

    /// Polls until `condition` holds or `timeout` passes; returns whether it held. The default bound only catches a
    /// hang: a CI machine running 800 tests in parallel on 2 cores can starve a thread for seconds.
    @discardableResult
    func wait(timeout: Duration = .seconds(30), until condition: ([WebSocketEvent]) -> Bool) async -> Bool {
        let clock = ContinuousClock()
        let end = clock.now + timeout
        while clock.now < end {
            if condition(all) { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return condition(all)
    }

    func openedIDs(_ events: [WebSocketEvent]? = nil) -> [WebSocketConnectionID] {
        (events ?? all).compactMap { if case let .opened(id, _, _) = $0 { id } else { nil } }
    }

    func messages(_ id: WebSocketConnectionID, _ events: [WebSocketEvent]? = nil) -> [[UInt8]] {
        (events ?? all).compactMap { if case let .message(mid, bytes) = $0, mid == id { bytes } else { nil } }
    }

    func closedReason(_ id: WebSocketConnectionID, _ events: [WebSocketEvent]? = nil) -> String? {
        for case let .closed(cid, reason) in events ?? all where cid == id {
            return reason
        }
        return nil
    }

    func waitOpened(_ id: WebSocketConnectionID, timeout: Duration = .seconds(30)) async -> Bool {
        await wait(timeout: timeout) { events in
            events.contains { if case let .opened(oid, _, _) = $0 { oid == id } else { false } }
        }
    }

    func waitClosed(_ id: WebSocketConnectionID, timeout: Duration = .seconds(30)) async -> String? {
        await wait(timeout: timeout) { self.closedReason(id, $0) != nil }
        return closedReason(id)
    }
}

/// A server that echoes every message back, as tests need a peer that sends from inside
/// its event handler.
final class EchoServer: Sendable {
    let log = EventLog()
    private let reference = Locked<WebSocketServer?>(nil)
    /// Each connection's info as the server had it when `.opened` went out (on the service thread, so a
    /// connection that closes before a test asks is still described).
    let infoAtOpen = Locked<[WebSocketConnectionID: WebSocketConnectionInfo]>([:])
    let server: WebSocketServer

    init(configuration: WebSocketServerConfiguration = WebSocketServerConfiguration(), authenticate: Bool = true) throws {
        let log = self.log
        let reference = self.reference
        let infoAtOpen = self.infoAtOpen
        server = try WebSocketServer(configuration: configuration) { event in
            let server = reference.value
            if case let .opened(id, _, _) = event, let info = server?.info(of: id) {
                infoAtOpen.withLock { $0[id] = info }
            }
            log.handler(event)
            switch event {
            case let .opened(id, _, _):
                if authenticate { server?.markAuthenticated(id) }
            case let .message(id, bytes):
                server?.send(bytes, to: id)
            case .closed:
                break
            }
        }
        reference.value = server
    }

    var port: Int { server.port }

    func shutdown() {
        server.shutdown()
        reference.value = nil
    }
}

extension Locked {
    /// The value, read or replaced under the lock (tests share small values with escaping closures this way).
    var value: Value {
        get { withLock { $0 } }
        set { withLock { $0 = newValue } }
    }
}

/// A server and a client on loopback, each with its own event log; shut down with `shutdown()` (use `defer`).
final class Loopback {
    let serverLog = EventLog()
    let server: WebSocketServer
    let log = EventLog()
    let client: WebSocketClient

    /// The default configuration, with a pre-authentication deadline long enough that a test marking its connection
    /// authenticated from an async task (which a loaded machine may run seconds late) is never cut off by it. Tests
    /// of the deadline pass their own configuration.
    static var patientConfiguration: WebSocketServerConfiguration {
        var configuration = WebSocketServerConfiguration()
        configuration.handshakeTimeout = 120
        return configuration
    }

    init(configuration: WebSocketServerConfiguration = Loopback.patientConfiguration,
         clientConfiguration: WebSocketClientConfiguration = WebSocketClientConfiguration()) throws {
        server = try WebSocketServer(configuration: configuration, onEvent: serverLog.handler)
        do {
            client = try WebSocketClient(configuration: clientConfiguration, onEvent: log.handler)
        } catch {
            server.shutdown()
            throw error
        }
    }

    /// Opens a client connection and waits until it is established; `port`: another way to the server (a relay).
    func connect(port: Int? = nil) async throws -> WebSocketConnectionID {
        try await connectClient(client, log, port: port ?? server.port)
    }

    /// Opens a connection and marks the server's side authenticated: (client side, server side).
    func connectAuthenticated(port: Int? = nil) async throws -> (WebSocketConnectionID, WebSocketConnectionID) {
        let before = serverLog.openedIDs().count
        let id = try await connect(port: port)
        #expect(await serverLog.wait { serverLog.openedIDs($0).count == before + 1 })
        let serverSide = try #require(serverLog.openedIDs().last)
        server.markAuthenticated(serverSide)
        return (id, serverSide)
    }

    func shutdown() {
        client.shutdown()
        server.shutdown()
    }
}

/// Opens a client connection and waits until it is established.
func connectClient(
    _ client: WebSocketClient, _ log: EventLog, port: Int,
    path: String = "/speakbridge.v1/session", subprotocol: String = "speakbridge.v1"
) async throws -> WebSocketConnectionID {
    // 30 s to connect, not the client's 5: on loopback only a starved service thread takes longer than a moment.
    let id = client.connect(host: "127.0.0.1", port: port, path: path, subprotocol: subprotocol, timeout: 30)
    let opened = await log.waitOpened(id)
    try #require(opened, "client \(id) did not open: \(log.closedReason(id) ?? "no event")")
    return id
}

/// A hand-made WebSocket client over a plain TCP socket, for frames lws would never send.
final class RawWebSocket {
    let fd: Int32

    /// Connects to 127.0.0.1:port from `source` (any loopback address: 127.0.0.0/8 is all local).
    init(port: Int, source: String = "127.0.0.1") throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(bound == 0, "bind to \(source) failed: errno \(errno)")
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(result == 0, "connect failed: errno \(errno)")
        // Reads give up after 30 s: a bound that only catches a hang (a refusal is an EOF, seen at once).
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        close(fd)
    }

    /// The local TCP port of this socket.
    var localPort: Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Sends the upgrade request and returns the response head. `origin`: an `Origin` header, as a browser sends.
    func upgrade(path: String = "/speakbridge.v1/session", subprotocol: String? = "speakbridge.v1",
                 host: String = "127.0.0.1", origin: String? = nil) -> String {
        var request = "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        if let origin { request += "Origin: \(origin)\r\n" }
        request += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let subprotocol { request += "Sec-WebSocket-Protocol: \(subprotocol)\r\n" }
        request += "\r\n"
        sendAll(Array(request.utf8))
        var head: [UInt8] = []
        while !head.ends(with: Array("\r\n\r\n".utf8)) {
            guard let byte = receive(1).first else { break }
            head.append(byte)
        }
        return String(decoding: head, as: UTF8.self)
    }

    /// A masked client frame with the given first byte (FIN/opcode) and payload; the header
    /// may announce more than `payload` holds (`announcedLength`).
    func sendFrame(opcode: UInt8, payload: [UInt8], announcedLength: Int? = nil, fin: Bool = true) {
        let length = announcedLength ?? payload.count
        var frame: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        if length < 126 {
            frame.append(0x80 | UInt8(length))
        } else if length <= 0xFFFF {
            frame += [0x80 | 126, UInt8(length >> 8), UInt8(length & 0xFF)]
        } else {
            frame.append(0x80 | 127)
            frame += (0..<8).reversed().map { UInt8((UInt64(length) >> (8 * UInt64($0))) & 0xFF) }
        }
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        sendAll(frame)
    }

    /// Reads one server frame: (opcode, payload), or nil on EOF/timeout.
    func readFrame() -> (opcode: UInt8, payload: [UInt8])? {
        let head = receive(2)
        guard head.count == 2 else { return nil }
        var length = Int(head[1] & 0x7F)
        if length == 126 {
            let extended = receive(2)
            guard extended.count == 2 else { return nil }
            length = Int(extended[0]) << 8 | Int(extended[1])
        } else if length == 127 {
            let extended = receive(8)
            guard extended.count == 8 else { return nil }
            length = extended.reduce(0) { $0 << 8 | Int($1) }
        }
        let payload = receive(length)
        guard payload.count == length else { return nil }
        return (head[0] & 0x0F, payload)
    }

    /// Reads frames until a close frame arrives; returns its status code.
    func readCloseCode() -> UInt16? {
        while let frame = readFrame() {
            if frame.opcode == 0x8 {
                guard frame.payload.count >= 2 else { return 1005 }
                return UInt16(frame.payload[0]) << 8 | UInt16(frame.payload[1])
            }
        }
        return nil
    }

    /// True when the server closed the TCP connection (EOF) within the receive timeout.
    func readsEOF() -> Bool {
        var byte: UInt8 = 0
        while true {
            let n = recv(fd, &byte, 1, 0)
            if n == 0 { return true }
            if n < 0 { return errno == ECONNRESET }
        }
    }

    func sendAll(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            offset += n
        }
    }

    func receive(_ count: Int) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let n = buffer[filled...].withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            filled += n
        }
        return Array(buffer.prefix(filled))
    }
}

/// The status code of an HTTP response head ("HTTP/1.x 404 Not Found…"), or nil.
func httpStatus(_ head: String) -> Int? {
    let parts = head.split(separator: " ", maxSplits: 2)
    guard parts.count >= 2, parts[0].hasPrefix("HTTP/1.") else { return nil }
    return Int(parts[1])
}

extension Array where Element: Equatable {
    func ends(with suffix: [Element]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}

/// A TCP socket bound to 127.0.0.1 on an ephemeral port (listening if `backlog` is given): (fd, port).
/// The caller closes the fd.
func loopbackSocket(listenBacklog backlog: Int32? = nil) throws -> (Int32, Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    do {
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                try #require(bind(fd, $0, length) == 0)
                if let backlog { try #require(listen(fd, backlog) == 0) }
                try #require(getsockname(fd, $0, &length) == 0)
            }
        }
    } catch {
        close(fd)
        throw error
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// A TCP port on 127.0.0.1 that nothing listens on (bound, read back, closed).
func unusedPort() throws -> Int {
    let (fd, port) = try loopbackSocket()
    close(fd)
    return port
}

/// CPU time (utime + stime, in clock ticks) a thread of this process has used.
func threadCPUTicks(_ tid: Int32) throws -> Int {
    let fd = open("/proc/self/task/\(tid)/stat", O_RDONLY)
    try #require(fd >= 0, "no /proc entry for thread \(tid)")
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 1024)
    let n = read(fd, &buffer, buffer.count)
    try #require(n > 0)
    let text = String(decoding: buffer.prefix(n), as: UTF8.self)
    // Fields after the ")" that ends the thread name: state is field 3, utime 14, stime 15.
    let afterName = text[text.index(after: try #require(text.lastIndex(of: ")")))...]
    let fields = afterName.split(separator: " ")
    return try #require(Int(fields[11])) + #require(Int(fields[12]))
}

/// The name the kernel shows for a thread of this process.
func threadName(_ tid: Int32) -> String {
    let fd = open("/proc/self/task/\(tid)/comm", O_RDONLY)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 64)
    let n = read(fd, &buffer, buffer.count)
    return n > 0 ? String(decoding: buffer.prefix(n), as: UTF8.self).trimmingNewline() : ""
}

extension String {
    func trimmingNewline() -> String {
        var copy = self
        while copy.last?.isNewline == true { copy.removeLast() }
        return copy
    }
}

/// `[UInt8]` holding `index` big-endian, padded to `size` bytes.
func numbered(_ index: Int, size: Int = 8) -> [UInt8] {
    var bytes = (0..<4).reversed().map { UInt8((index >> (8 * $0)) & 0xFF) }
    if size > 4 { bytes += [UInt8](repeating: 0xAB, count: size - 4) }
    return bytes
}

func number(_ bytes: [UInt8]) -> Int {
    bytes.prefix(4).reduce(0) { $0 << 8 | Int($1) }
}
