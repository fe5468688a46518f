#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import SpeakBridgeProtocol
import SpeakBridgeTestSupport
import Testing

/// Attacks on the WebSocket layer of the real daemon from raw sockets (issue 8 rows 1 and 2). After each, a paired
/// client must still get a fresh line through.
@Suite("End to end: wire attacks", .serialized)
struct WireAttackTests {
    /// Row 1: a non-final binary fragment, then a continuation whose 64-bit length is 2^63 − 1, used to make the
    /// daemon trap on an integer overflow. Then a seeded mutation fuzz of a few thousand frames.
    @Test("a continuation announcing 2^63-1 bytes and a frame fuzz leave the daemon serving")
    func hugeContinuationAndFrameFuzz() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        #expect(try pair.send(["before"]).status == 0)

        let raw = try RawSocketPeer(port: pair.port)
        #expect(raw.upgrade().hasPrefix("HTTP/1.1 101"))
        raw.sendFrame(first: 0x02, payload: [1, 2, 3])  // binary, FIN clear
        // One payload byte after the header: lws calls back only once payload has arrived.
        raw.sendFrame(first: 0x80, payload: [4], announcedLength: (1 << 63) - 1)  // continuation, FIN set
        let code = raw.readCloseCode()
        #expect(code == 1009, "close code \(String(describing: code))")
        #expect(pair.daemon!.process.isRunning, "the daemon died: \(pair.daemon!.stderr.suffix(500))")

        let fuzz = FrameFuzzer(seed: 0x5B_0008_0001, port: pair.port)
        let sent = fuzz.run(frames: 3_000, seconds: 4)
        print("wire fuzz: \(sent.frames) frames on \(sent.connections) connections")
        #expect(sent.frames >= 500, "the fuzzer could not send much: \(sent)")
        #expect(pair.daemon!.process.isRunning, "the daemon died under the fuzz: \(pair.daemon!.stderr.suffix(500))")

        let after = try pair.send(["after the attack"], timeout: 30)
        #expect(after.status == 0, "\(after.stderr)")
        try Harness.wait("the fresh line") { pair.daemon!.stdout.contains("after the attack") }
    }

    /// Row 2: an attacker on 127.0.0.2 holds and churns as many unauthenticated connections as it can (upgrade,
    /// never send message 1, re-open as soon as one is closed) while a paired client on 127.0.0.1 sends a line.
    @Test("a flood of unauthenticated connections from another address does not keep a paired client out")
    func unauthenticatedFloodFromAnotherAddress() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()

        let attacker = Flooder(port: pair.port, source: "127.0.0.2", sockets: 128)
        attacker.start(threads: 2)
        defer { attacker.stop() }
        // Let it fill every slot it can get.
        usleep(1_000_000)
        #expect(attacker.upgrades.load(ordering: .relaxed) >= 1, "the attack never got a connection in")

        let start = Date()
        // Generous: it takes well under a second; 15 s only separates "got through" from "kept out".
        let out = try run(["send", "--text", "fresh line", "--timeout", "15"], home: pair.phoneHome, timeout: 40)
        let elapsed = Date().timeIntervalSince(start)
        let stats = attacker.stats
        print(String(format: "pre-auth flood: paired client delivered in %.3f s; attacker: %@", elapsed, stats))
        #expect(out.status == 0, "\(out.stderr)")
        #expect(pair.daemon!.stdout.contains("fresh line"))
        #expect(pair.daemon!.process.isRunning)
    }
}

/// A hand-made WebSocket client over a TCP socket from a chosen loopback address, for frames lws would never send.
private final class RawSocketPeer {
    let fd: Int32

    init(port: Int, source: String = "127.0.0.1", receiveTimeout: Int = 5) throws {
        fd = try connectedSocket(port: port, source: source)
        var timeout = timeval(tv_sec: receiveTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    func upgrade(path: String = SpeakBridgeProtocol.sessionPath) -> String {
        sendAll(upgradeRequest(path: path))
        var head: [UInt8] = []
        while !(head.count >= 4 && Array(head.suffix(4)) == [13, 10, 13, 10]) {
            var byte: UInt8 = 0
            guard recv(fd, &byte, 1, 0) == 1 else { break }
            head.append(byte)
        }
        return String(decoding: head, as: UTF8.self)
    }

    /// A masked frame with the given first byte (FIN, RSV, opcode); the header may announce another length.
    func sendFrame(first: UInt8, payload: [UInt8], announcedLength: UInt64? = nil) {
        sendAll(maskedFrame(first: first, payload: payload, announcedLength: announcedLength))
    }

    /// Reads server frames until a close frame: its code (1005 without one), or nil on EOF/timeout.
    func readCloseCode() -> UInt16? {
        while true {
            let head = receive(2)
            guard head.count == 2 else { return nil }
            var length = UInt64(head[1] & 0x7F)
            if length == 126 {
                length = receive(2).reduce(0) { $0 << 8 | UInt64($1) }
            } else if length == 127 {
                length = receive(8).reduce(0) { $0 << 8 | UInt64($1) }
            }
            guard length <= 1 << 20 else { return nil }
            let payload = receive(Int(length))
            if head[0] & 0x0F == 0x8 {
                return payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : 1005
            }
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

private func upgradeRequest(path: String = SpeakBridgeProtocol.sessionPath) -> [UInt8] {
    Array(("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        + "Sec-WebSocket-Protocol: \(SpeakBridgeProtocol.subprotocol)\r\n\r\n").utf8)
}

private func maskedFrame(first: UInt8, payload: [UInt8], announcedLength: UInt64? = nil) -> [UInt8] {
    let length = announcedLength ?? UInt64(payload.count)
    var frame: [UInt8] = [first]
    if length < 126 {
        frame.append(0x80 | UInt8(length))
    } else if length <= 0xFFFF {
        frame += [0x80 | 126, UInt8(length >> 8), UInt8(length & 0xFF)]
    } else {
        frame.append(0x80 | 127)
        frame += (0..<8).reversed().map { UInt8((length >> (8 * UInt64($0))) & 0xFF) }
    }
    let mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
    frame += mask
    frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    return frame
}

/// A blocking TCP socket from `source` (bound before connect) to 127.0.0.1:port.
private func connectedSocket(port: Int, source: String) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HarnessError("socket: errno \(errno)") }
    var local = sockaddr_in()
    local.sin_family = sa_family_t(AF_INET)
    local.sin_addr.s_addr = inet_addr(source)
    var remote = sockaddr_in()
    remote.sin_family = sa_family_t(AF_INET)
    remote.sin_port = in_port_t(UInt16(port).bigEndian)
    remote.sin_addr.s_addr = inet_addr("127.0.0.1")
    let size = socklen_t(MemoryLayout<sockaddr_in>.size)
    // Bounds connect() too, should the listen backlog ever be full.
    var sendTimeout = timeval(tv_sec: 0, tv_usec: 200_000)
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &sendTimeout, socklen_t(MemoryLayout<timeval>.size))
    let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) } }
    let connected = bound == 0
        ? withUnsafePointer(to: &remote) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, size) } }
        : -1
    guard connected == 0 else {
        let code = errno
        close(fd)
        throw HarnessError("connect from \(source): errno \(code)")
    }
    return fd
}

/// Seeded mutation fuzz of WebSocket frames from raw sockets: valid frames, then mutated headers (opcodes, RSV and
/// FIN bits, 7/16/64-bit lengths up to 2^64 − 1, unmasked), truncated frames and garbage. A new connection is
/// opened whenever the daemon closes one.
private struct FrameFuzzer {
    var seed: UInt64
    var port: Int

    func run(frames: Int, seconds: Double) -> (frames: Int, connections: Int) {
        var rng = SplitMix64(seed: seed)
        let deadline = Date().addingTimeInterval(seconds)
        var sent = 0
        var connections = 0
        while sent < frames && Date() < deadline {
            guard let peer = try? RawSocketPeer(port: port, receiveTimeout: 1) else { continue }
            connections += 1
            guard peer.upgrade().hasPrefix("HTTP/1.1 101") else { continue }
            // A handful of frames per connection: most mutations get the connection closed quickly.
            for _ in 0..<Int(rng.next() % 12 + 1) where sent < frames {
                peer.sendAll(mutatedFrame(&rng))
                sent += 1
                var probe: UInt8 = 0
                // Stop at once if the daemon closed the connection (EOF), without waiting for the timeout.
                if recv(peer.fd, &probe, 1, Int32(MSG_DONTWAIT)) == 0 { break }
            }
        }
        return (sent, connections)
    }

    func mutatedFrame(_ rng: inout SplitMix64) -> [UInt8] {
        let payload = (0..<Int(rng.next() % 200)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        let opcodes: [UInt8] = [0x0, 0x1, 0x2, 0x8, 0x9, 0xA, 0x3, 0xB, 0xF]
        var first = opcodes[Int(rng.next() % UInt64(opcodes.count))]
        if rng.next() % 3 != 0 { first |= 0x80 }
        if rng.next() % 8 == 0 { first |= UInt8(truncatingIfNeeded: rng.next()) & 0x70 }
        let lengths: [UInt64] = [0, 1, 125, 126, 127, 65_535, 65_536, 1 << 32, (1 << 63) - 1, 1 << 63, .max]
        let announced: UInt64? = switch rng.next() % 4 {
        case 0: lengths[Int(rng.next() % UInt64(lengths.count))]
        case 1: UInt64(payload.count) + rng.next() % 70_000
        default: nil
        }
        var frame = maskedFrame(first: first, payload: payload, announcedLength: announced)
        switch rng.next() % 10 {
        case 0: frame[1] &= 0x7F  // unmasked client frame
        case 1: frame = Array(frame.prefix(Int(rng.next() % UInt64(frame.count + 1))))  // truncated
        case 2: frame = (0..<Int(rng.next() % 64)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }  // garbage
        case 3: if !frame.isEmpty { frame[Int(rng.next() % UInt64(frame.count))] ^= UInt8(truncatingIfNeeded: rng.next()) }
        default: break
        }
        return frame
    }
}

/// Holds up to `sockets` connections per thread from one source address: each sends the upgrade request and then
/// nothing; whenever the daemon closes one (or refuses it), another is opened at once.
private final class Flooder: @unchecked Sendable {
    // Why unchecked: `threads` is touched only by start/stop on the test's thread; the counters are atomics.
    let port: Int
    let source: String
    let sockets: Int
    let stopping = Atomic<Bool>(false)
    let upgrades = Atomic<Int>(0)
    let opened = Atomic<Int>(0)
    let closedByDaemon = Atomic<Int>(0)
    private var threads: [Thread] = []

    init(port: Int, source: String, sockets: Int) {
        self.port = port
        self.source = source
        self.sockets = sockets
    }

    var stats: String {
        "\(opened.load(ordering: .relaxed)) connections opened, \(upgrades.load(ordering: .relaxed)) upgraded, "
            + "\(closedByDaemon.load(ordering: .relaxed)) closed by the daemon"
    }

    func start(threads count: Int) {
        for _ in 0..<count {
            let thread = Thread { [self] in flood() }
            threads.append(thread)
            thread.start()
        }
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        while threads.contains(where: { !$0.isFinished }) { usleep(10_000) }
        threads = []
    }

    private func flood() {
        var fds: [Int32] = []
        let request = upgradeRequest()
        var buffer = [UInt8](repeating: 0, count: 1024)
        while !stopping.load(ordering: .relaxed) {
            while fds.count < sockets, let fd = try? connectedSocket(port: port, source: source) {
                _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                fds.append(fd)
                opened.add(1, ordering: .relaxed)
            }
            var polls = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&polls, nfds_t(polls.count), 10) > 0 else { continue }
            var keep: [Int32] = []
            for entry in polls {
                guard entry.revents != 0 else {
                    keep.append(entry.fd)
                    continue
                }
                let n = recv(entry.fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if n > 0 {
                    if buffer.prefix(12).elementsEqual(Array("HTTP/1.1 101".utf8)) { upgrades.add(1, ordering: .relaxed) }
                    keep.append(entry.fd)
                } else {
                    closedByDaemon.add(1, ordering: .relaxed)
                    close(entry.fd)
                }
            }
            fds = keep
        }
        for fd in fds { close(fd) }
    }
}
