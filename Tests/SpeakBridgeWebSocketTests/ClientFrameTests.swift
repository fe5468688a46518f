import SpeakBridgeSupport
import Testing
@testable import SpeakBridgeWebSocket

/// A client's data frames are framed and masked by us (`ClientFrame`, keys from `MaskingKeys`) and written raw.
/// What matters is what reaches the socket: valid masked RFC 6455 frames, a fresh key each, the payload intact.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct ClientFrameTests {
    /// Every length encoding, captured on a real socket between a real client and a real server (which must also
    /// receive each message intact): FIN + binary, MASK set, the shortest length form, distinct keys, and the
    /// unmasked payload byte for byte what the application sent.
    @Test func framesOnTheWireAreMaskedRFC6455Frames() async throws {
        var configuration = Loopback.patientConfiguration
        configuration.maxMessageSize = 100_000
        let link = try Loopback(configuration: configuration)
        defer { link.shutdown() }
        let relay = try RecordingRelay(to: link.server.port)
        defer { relay.stop() }
        let (id, serverSide) = try await link.connectAuthenticated(port: relay.port)
        let (serverLog, client) = (link.serverLog, link.client)

        let sizes = [0, 1, 7, 8, 9, 125, 126, 127, 1_000, 65_535, 65_536, 70_001]
        var generator = SystemRandomNumberGenerator()
        let messages = sizes.map { size in (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) } }
        for message in messages { client.send(message, on: id) }
        let arrived = await serverLog.wait(timeout: .seconds(10)) { serverLog.messages(serverSide, $0).count == messages.count }
        #expect(arrived)
        #expect(serverLog.messages(serverSide) == messages)

        let frames = try #require(WireFrame.parseClientStream(relay.clientBytes), "the client's bytes are not whole frames")
        let data = frames.filter { $0.opcode == 2 }
        try #require(data.count == messages.count)
        for (frame, message) in zip(data, messages) {
            #expect(frame.fin && frame.reserved == 0 && frame.masked)
            #expect(frame.lengthBits == (message.count < 126 ? 7 : message.count <= 0xFFFF ? 16 : 64))
            #expect(frame.payload == message)
        }
        #expect(Set(data.map(\.key)).count == data.count, "a masking key was used twice")
        // Whatever else lws wrote (a pong, say) is masked as well; nothing is unmasked.
        #expect(frames.allSatisfy { $0.masked })
    }

    /// lws's own control frames and our raw frames share the socket: while a server that stops reading leaves part
    /// of a raw frame with lws (its buflist), the server's pings arrive and lws answers them. Every pong must fall
    /// between whole frames (lws flushes the rest of a frame before anything else and appends any write behind it),
    /// and every message must still arrive intact on the same connection.
    @Test func pongsNeverSplitAPartiallyWrittenFrame() async throws {
        var configuration = Loopback.patientConfiguration
        configuration.pingInterval = 1
        configuration.hangupAfter = 30
        let link = try Loopback(configuration: configuration)
        defer { link.shutdown() }
        let relay = try RecordingRelay(to: link.server.port)
        defer { relay.stop() }
        let (id, serverSide) = try await link.connectAuthenticated(port: relay.port)
        let (server, serverLog, client, log) = (link.server, link.serverLog, link.client, link.log)

        server.pauseReceiving(serverSide)
        var generator = SystemRandomNumberGenerator()
        // About 3 MB: more than the loopback socket, the relay and the server's kernel buffers hold.
        let messages = (0..<48).map { _ in
            [UInt8](unsafeUninitializedCapacity: 65_000) { buffer, count in
                let raw = UnsafeMutableRawBufferPointer(buffer)
                for offset in stride(from: 0, to: 65_000 - 7, by: 8) {
                    raw.storeBytes(of: generator.next() as UInt64, toByteOffset: offset, as: UInt64.self)
                }
                for offset in (65_000 / 8 * 8)..<65_000 { raw[offset] = UInt8.random(in: 0...255, using: &generator) }
                count = 65_000
            }
        }
        for message in messages { client.send(message, on: id) }
        // The server pings after a second without traffic from the client; lws answers while frames wait.
        try await Task.sleep(for: .milliseconds(2_500))
        server.resumeReceiving(serverSide)
        let arrived = await serverLog.wait(timeout: .seconds(20)) { serverLog.messages(serverSide, $0).count == messages.count }
        #expect(arrived)
        #expect(serverLog.messages(serverSide) == messages)
        #expect(serverLog.closedReason(serverSide) == nil && log.closedReason(id) == nil)

        let frames = try #require(WireFrame.parseClientStream(relay.clientBytes), "the client's bytes are not whole frames")
        #expect(frames.filter { $0.opcode == 2 }.map(\.payload) == messages)
        #expect(frames.contains { $0.opcode == 0xA }, "no pong was sent while frames waited (the test did not test)")
        #expect(frames.allSatisfy { $0.masked && $0.fin })
    }

    /// The frame writer against the rule written out byte by byte (RFC 6455 §5.3: octet i XOR key octet i mod 4),
    /// for every tail length and each length encoding's edges.
    @Test func frameWriterMatchesTheByteByByteRule() {
        var generator = SystemRandomNumberGenerator()
        for count in Array(0...40) + [125, 126, 127, 65_535, 65_536, 65_543] {
            let payload = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let key = UInt32.random(in: 0...UInt32.max, using: &generator)
            let keyBytes = withUnsafeBytes(of: key) { Array($0) }
            var expected: [UInt8] = [0x82]
            if count < 126 {
                expected.append(0x80 | UInt8(count))
            } else if count <= 0xFFFF {
                expected += [0x80 | 126, UInt8(count >> 8), UInt8(count & 0xFF)]
            } else {
                expected.append(0x80 | 127)
                expected += (0..<8).reversed().map { UInt8((UInt64(count) >> (8 * UInt64($0))) & 0xFF) }
            }
            expected += keyBytes
            expected += payload.enumerated().map { $0.element ^ keyBytes[$0.offset % 4] }
            var out = [UInt8](repeating: 0, count: ClientFrame.headerSize(payloadCount: count) + count)
            let written = out.withUnsafeMutableBytes { o in
                payload.withUnsafeBytes { ClientFrame.write(payload: $0, key: key, into: o.baseAddress!) }
            }
            #expect(written == out.count)
            #expect(out == expected, "payload of \(count) bytes")
        }
    }

    /// Keys come from a pool filled once per 1,024 keys, and do not repeat in practice.
    @Test func maskingKeysComeFromAPoolAndDiffer() {
        let keys = MaskingKeys()
        #expect(keys.refills == 0)
        let drawn = (0..<2_048).map { _ in keys.take() }
        #expect(keys.refills == 2)
        // 2,048 draws of 32 random bits collide with probability about 5e-4; allow one pair.
        #expect(Set(drawn).count >= drawn.count - 1)
        _ = keys.take()
        #expect(keys.refills == 3)
    }
}
