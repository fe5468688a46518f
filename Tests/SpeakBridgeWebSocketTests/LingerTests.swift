#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeWebSocket
import Testing

/// A close the application asks for on an authenticated server connection lingers: the close frame goes out, what the
/// peer still sends is read and dropped until its own close frame answers (then the TCP connection ends with a FIN,
/// nothing unread), or 2 s pass. Before, lws closed the socket right after the close frame, and bytes the peer had
/// sent meanwhile made the kernel answer with a reset that could discard the frames before it (the daemon's `error`
/// for a refused chunk). At most 64 connections linger at once.
@Suite("WebSocket: a lingering close")
struct LingerTests {
    /// A raw client upgraded on `link`'s server, its server side marked authenticated: (client, server side).
    static func authenticatedRaw(_ link: Loopback) async throws -> (RawWebSocket, WebSocketConnectionID) {
        let before = link.serverLog.openedIDs().count
        let raw = try RawWebSocket(port: link.server.port)
        #expect(httpStatus(raw.upgrade()) == 101)
        #expect(await link.serverLog.wait { link.serverLog.openedIDs($0).count == before + 1 })
        let serverSide = try #require(link.serverLog.openedIDs().last)
        link.server.markAuthenticated(serverSide)
        return (raw, serverSide)
    }

    /// recv(2) of one byte: 0 at a FIN, -1 with ECONNRESET at a reset.
    static func end(of raw: RawWebSocket) -> (Int, Int32) {
        var byte: UInt8 = 0
        let n = recv(raw.fd, &byte, 1, 0)
        return (n, n < 0 ? errno : 0)
    }

    @Test func aPeerThatKeepsSendingGetsTheCloseFrameAndAFinAfterItsAnswer() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (raw, serverSide) = try await Self.authenticatedRaw(link)
        // Authenticated once the mark is applied on the service thread: a message that arrives after it is read.
        raw.sendFrame(opcode: 0x2, payload: [1])
        #expect(await link.serverLog.wait { link.serverLog.messages(serverSide, $0) == [[1]] })
        link.server.close(serverSide, code: 1008, reason: "refused")
        // The peer goes on sending (it has not read the close yet), then reads.
        for i in 0..<20 {
            raw.sendFrame(opcode: 0x2, payload: [UInt8](repeating: UInt8(i), count: 2_000))
            usleep(5_000)
        }
        #expect(raw.readCloseCode() == 1008)
        #expect(link.serverLog.messages(serverSide) == [[1]], "a message after the close reached the application")
        #expect(link.serverLog.closedReason(serverSide) == nil, "closed before the peer answered")
        raw.sendFrame(opcode: 0x8, payload: [0x03, 0xE8])
        let (n, error) = Self.end(of: raw)
        #expect(n == 0, "not a FIN: recv \(n), errno \(error)")
        let reason = await link.serverLog.waitClosed(serverSide, timeout: .seconds(10))
        #expect(reason == "local close 1008: refused")
    }

    @Test func aPeerThatNeverAnswersIsClosedAfterAboutTwoSeconds() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (raw, serverSide) = try await Self.authenticatedRaw(link)
        let start = ContinuousClock.now
        link.server.close(serverSide, code: 1000)
        #expect(raw.readCloseCode() == 1000)
        #expect(await link.serverLog.waitClosed(serverSide, timeout: .seconds(10)) != nil)
        let waited = ContinuousClock.now - start
        // It lingered (no upper bound here: a loaded machine runs the timeout late, and a hang is the 10 s wait's).
        #expect(waited >= .milliseconds(1_500), "closed after \(waited), before the peer could answer")
        #expect(raw.readsEOF())
    }

    @Test func atMost64LingerAtOnceTheRestCloseAtOnce() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        var connections: [(RawWebSocket, WebSocketConnectionID)] = []
        for _ in 0..<70 { connections.append(try await Self.authenticatedRaw(link)) }
        // Marked authenticated before the closes: a message from the last one is read.
        connections[69].0.sendFrame(opcode: 0x2, payload: [9])
        #expect(await link.serverLog.wait { link.serverLog.messages(connections[69].1, $0) == [[9]] })
        for (_, serverSide) in connections { link.server.close(serverSide, code: 1001) }
        // None answers: 64 linger about 2 s, the other 6 end at once.
        #expect(await link.serverLog.wait(timeout: .seconds(10)) { events in
            connections.filter { link.serverLog.closedReason($0.1, events) != nil }.count >= 6
        })
        let early = connections.filter { link.serverLog.closedReason($0.1) != nil }.count
        #expect(early == 6, "\(early) closed at once (want 70 - 64)")
        #expect(await link.serverLog.wait(timeout: .seconds(10)) { events in
            connections.allSatisfy { link.serverLog.closedReason($0.1, events) != nil }
        })
    }
}
