import Dispatch
import SpeakBridgeSupport
import Testing
@testable import SpeakBridgeWebSocket

/// A client's frame with nothing ahead of it is written in the loop turn that sent it (no WRITEABLE round trip);
/// behind a socket that does not take more, frames queue as before and nothing overtakes anything.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct DirectWriteTests {
    /// A free connection: every frame goes out at once, and arrives, in order.
    @Test func framesOnAFreeConnectionAreWrittenAtOnce() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (id, serverSide) = try await link.connectAuthenticated()
        await DirectWriteFlow.clientToServer(link, client: id, server: serverSide).framesGoOutAtOnce(count: 20)
    }

    /// A peer that stops reading: later frames queue; once it reads again everything arrives once, in order.
    @Test func framesBehindAFullSocketQueueAndKeepTheirOrder() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (id, serverSide) = try await link.connectAuthenticated()
        try await DirectWriteFlow.clientToServer(link, client: id, server: serverSide).framesQueueBehindAFullSocket()
    }
}
