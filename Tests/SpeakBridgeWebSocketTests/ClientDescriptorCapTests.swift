#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import SpeakBridgeWebSocket

/// A client context is created under a lowered soft descriptor limit (`ClientDescriptorCap`), which is put back
/// afterwards; a client still connects and talks when the process holds descriptors numbered above the floor.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct ClientDescriptorCapTests {
    static func softLimit() -> Int {
        var limit = rlimit()
        _ = getrlimit(ClientDescriptorCap.descriptorResource, &limit)
        return limit.rlim_cur > rlim_t(Int.max) ? Int.max : Int(limit.rlim_cur)
    }

    @Test func theCapLeavesHeadroomAndNeverRaises() {
        #expect(ClientDescriptorCap.cap(current: 20_000, highest: 5) == 1024)
        #expect(ClientDescriptorCap.cap(current: 20_000, highest: 1500) == 1500 + 513)
        #expect(ClientDescriptorCap.cap(current: 1024, highest: 5) == nil)
        #expect(ClientDescriptorCap.cap(current: 800, highest: 5) == nil)
        #expect(ClientDescriptorCap.cap(current: 2000, highest: 1500) == nil)
        #expect(ClientDescriptorCap.cap(current: nil, highest: 5) == nil)
        #expect(ClientDescriptorCap.cap(current: 20_000, highest: nil) == nil)
        #expect(ClientDescriptorCap.cap(current: Int.max, highest: Int.max - 3) == nil)
    }

    @Test func theHighestOpenDescriptorIsFound() throws {
        let fd = dup(2)
        #expect(fd >= 0)
        defer { close(fd) }
        let highest = try #require(ClientDescriptorCap.highestOpenDescriptor())
        #expect(highest >= fd)
    }

    @Test func theLimitIsLoweredOnlyForTheBodyAndPutBack() {
        let before = Self.softLimit()
        let inside = ClientDescriptorCap.withLoweredLimit { Self.softLimit() }
        #expect(Self.softLimit() == before)
        if before > 2048 {
            #expect(inside < before)
            #expect(inside >= ClientDescriptorCap.floor)
        } else {
            #expect(inside == before)
        }
    }

    /// A descriptor numbered 1,500 is open while the client's context is created: the cap leaves room above it,
    /// and the client connects and echoes as always. (Needs a soft limit above 2,013 to place the descriptor.)
    @Test(.enabled(if: softLimit() > 2100)) func aClientConnectsWithAHighDescriptorOpen() async throws {
        let high: Int32 = 1500
        #expect(dup2(2, high) == high)
        defer { close(high) }
        let before = Self.softLimit()
        let echo = try EchoServer()
        defer { echo.shutdown() }
        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        defer { client.shutdown() }
        #expect(Self.softLimit() == before)
        let id = try await connectClient(client, log, port: echo.port)
        client.send([1, 2, 3], on: id)
        #expect(await log.wait { log.messages(id, $0).count == 1 })
        #expect(log.messages(id) == [[1, 2, 3]])
    }
}
