import SpeakBridgeSupport
import SpeakBridgeWebSocket
import Testing

/// A client may offer several subprotocols, preferred first (`connect(subprotocols:)`): the server takes the first
/// it accepts and echoes it, and both sides can tell which it was (`info(of:)`) — a native `send` offers
/// `speakbridge.v1.aesgcm, speakbridge.v1` and seals its handshake under the cipher that comes back.
@Suite("Subprotocol choice: a list offered, the server's pick known to both sides")
struct SubprotocolChoiceTests {
    static let offered = ["speakbridge.v1.aesgcm", "speakbridge.v1"]

    func exchange(serverAccepts extra: [String], offering offered: [String]) async throws
        -> (client: String?, server: String?, closed: String?) {
        var configuration = Loopback.patientConfiguration
        configuration.extraSubprotocols = extra
        let echo = try EchoServer(configuration: configuration)
        defer { echo.shutdown() }
        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        defer { client.shutdown() }
        let id = client.connect(host: "127.0.0.1", port: echo.port, path: "/speakbridge.v1/session",
                                subprotocols: offered)
        guard await log.waitOpened(id) else { return (nil, nil, log.closedReason(id) ?? "no event") }
        let clientSide = client.info(of: id)?.subprotocol
        #expect(await echo.log.wait { echo.log.openedIDs($0).count == 1 })
        let serverSide = echo.log.openedIDs().first.flatMap { echo.infoAtOpen.value[$0]?.subprotocol }
        // The connection works under it: a message comes back.
        client.send([1, 2, 3], on: id)
        #expect(await log.wait { log.messages(id, $0) == [[1, 2, 3]] })
        return (clientSide, serverSide, nil)
    }

    @Test("the first offered that the server accepts: AESGCM when the server takes it")
    func firstAcceptedWins() async throws {
        let result = try await exchange(serverAccepts: ["speakbridge.v1.aesgcm"], offering: Self.offered)
        #expect(result.closed == nil)
        #expect(result.client == "speakbridge.v1.aesgcm")
        #expect(result.server == "speakbridge.v1.aesgcm")
    }

    @Test("a server that accepts only `speakbridge.v1` picks it from the same list, and says so to the client")
    func fallsBackToTheOther() async throws {
        let result = try await exchange(serverAccepts: [], offering: Self.offered)
        #expect(result.closed == nil)
        #expect(result.client == "speakbridge.v1")
        #expect(result.server == "speakbridge.v1")
    }

    @Test("one subprotocol offered, as before: the client is told that one")
    func singleOffer() async throws {
        let result = try await exchange(serverAccepts: ["speakbridge.v1.aesgcm"], offering: ["speakbridge.v1"])
        #expect(result.client == "speakbridge.v1")
        #expect(result.server == "speakbridge.v1")
    }

    @Test("nothing the server accepts: refused, never opened")
    func noneAccepted() async throws {
        let result = try await exchange(serverAccepts: [], offering: ["speakbridge.v1.aesgcm", "chat"])
        #expect(result.client == nil)
        #expect(result.closed != nil)
    }

    @Test("the client's record of the choice goes with the connection")
    func forgottenAtClose() async throws {
        let echo = try EchoServer(configuration: Loopback.patientConfiguration)
        defer { echo.shutdown() }
        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        defer { client.shutdown() }
        let id = client.connect(host: "127.0.0.1", port: echo.port, path: "/speakbridge.v1/session",
                                subprotocols: Self.offered)
        #expect(await log.waitOpened(id))
        #expect(client.info(of: id)?.subprotocol == "speakbridge.v1")
        client.close(id)
        #expect(await log.waitClosed(id) != nil)
        #expect(client.info(of: id) == nil)
    }
}
