import SpeakBridgeSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A TCP relay on 127.0.0.1 between one client and a server port that keeps a copy of every byte the client sent:
/// the real bytes the client wrote on its socket (HTTP upgrade, then frames), while the real server on the other
/// side still answers and checks them. One connection; runs on its own thread until either side closes or `stop()`.
final class RecordingRelay: Sendable {
    let port: Int
    private let listener: Int32
    private let recorded = Locked<[UInt8]>([])
    private let stopped = Locked(false)

    init(to serverPort: Int) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(bound == 0 && listen(fd, 1) == 0, "relay bind/listen failed: errno \(errno)")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let recorded = self.recorded
        let stopped = self.stopped
        Threads.start(name: "test-relay") {
            Self.run(listener: fd, serverPort: serverPort, recorded: recorded, stopped: stopped)
        }
    }

    /// Everything the client sent so far.
    var clientBytes: [UInt8] { recorded.withLock { $0 } }

    func stop() {
        stopped.withLock { $0 = true }
    }

    private static func run(listener: Int32, serverPort: Int, recorded: Locked<[UInt8]>, stopped: Locked<Bool>) {
        defer { close(listener) }
        var accept = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        while poll(&accept, 1, 50) == 0 { if stopped.withLock({ $0 }) { return } }
        let client = Glibc.accept(listener, nil, nil)
        guard client >= 0 else { return }
        let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard server >= 0 else { close(client); return }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(serverPort).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { close(client); close(server); return }
        // One thread per direction, so that a direction the receiver stops reading (a paused server) does not hold
        // up the other (the server's pings). Each ends at EOF or error, or at `stop()`; the last one closes both.
        let done = Locked(0)
        let finish: @Sendable () -> Void = {
            shutdown(client, Int32(SHUT_RDWR))
            shutdown(server, Int32(SHUT_RDWR))
            if done.withLock({ $0 += 1; return $0 }) == 2 { close(client); close(server) }
        }
        Threads.start(name: "test-relay-back") {
            pump(from: server, to: client, record: nil, stopped: stopped)
            finish()
        }
        pump(from: client, to: server, record: recorded, stopped: stopped)
        finish()
    }

    private static func pump(from: Int32, to: Int32, record: Locked<[UInt8]>?, stopped: Locked<Bool>) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var readable = pollfd(fd: from, events: Int16(POLLIN), revents: 0)
        while !stopped.withLock({ $0 }) {
            let ready = poll(&readable, 1, 50)
            guard ready >= 0 else { return }
            if ready == 0 { continue }
            let count = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
            guard count > 0 else { return }
            record?.withLock { $0 += buffer[0..<count] }
            var sent = 0
            while sent < count {
                let n = buffer.withUnsafeBytes { write(to, $0.baseAddress! + sent, count - sent) }
                guard n > 0 else { return }
                sent += n
            }
        }
    }
}

/// One frame as RFC 6455 §5.2 lays it out, parsed from a client's byte stream (after the HTTP upgrade).
struct WireFrame {
    var fin: Bool
    var reserved: UInt8
    var opcode: UInt8
    var masked: Bool
    /// How the length was written: 7 (in the second byte), 16 or 64 bits.
    var lengthBits: Int
    var key: [UInt8]
    /// The payload after unmasking with `key`.
    var payload: [UInt8]

    /// Frames from `stream` after the first "\r\n\r\n"; nil if the stream does not end on a whole frame.
    static func parseClientStream(_ stream: [UInt8]) -> [WireFrame]? {
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        guard let head = (0...max(0, stream.count - 4)).first(where: { Array(stream[$0..<min($0 + 4, stream.count)]) == end })
        else { return nil }
        var at = head + 4
        var frames: [WireFrame] = []
        func take(_ n: Int) -> ArraySlice<UInt8>? {
            guard n >= 0, stream.count - at >= n else { return nil }
            defer { at += n }
            return stream[at..<at + n]
        }
        while at < stream.count {
            guard let first = take(2) else { return nil }
            let b0 = first[first.startIndex], b1 = first[first.startIndex + 1]
            var length = Int(b1 & 0x7F)
            var bits = 7
            if length == 126 {
                guard let e = take(2) else { return nil }
                length = e.reduce(0) { $0 << 8 | Int($1) }
                bits = 16
            } else if length == 127 {
                guard let e = take(8), e.first! & 0x80 == 0 else { return nil }
                length = e.reduce(0) { $0 << 8 | Int($1) }
                bits = 64
            }
            let masked = b1 & 0x80 != 0
            let key = masked ? take(4).map(Array.init) : []
            guard let key, let body = take(length) else { return nil }
            var payload = Array(body)
            if masked { for i in payload.indices { payload[i] ^= key[i & 3] } }
            frames.append(WireFrame(fin: b0 & 0x80 != 0, reserved: (b0 >> 4) & 7, opcode: b0 & 0x0F, masked: masked,
                                    lengthBits: bits, key: key, payload: payload))
        }
        return frames
    }
}
