import SpeakBridgeCrypto
@testable import SpeakBridgeDesktopCore
@testable import SpeakBridgeProtocol
import Testing

@Suite("Desktop core: handshake edges and restart")
struct EdgeTests {
    @Test("session message 1 without hello: closed (1000) with no message 2, one rejection")
    func helloMissing() throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client])
        let c = desk.newConnection()
        desk.run(.connected(c, path: SpeakBridgeProtocol.sessionPath, remote: "127.0.0.1"))
        var m = try InitiatorMachine(intent: .session, localStatic: phone.key, desktopKey: Desk.publicKey,
                                     psk: try #require(phone.psk), firstMessage: .bye)
        desk.run(.frame(c, try m.start()))
        #expect(desk.frames[c, default: []].isEmpty)
        guard case .rejected(.protocolViolation)? = desk.closes[c] else { Issue.record("\(String(describing: desk.closes[c]))"); return }
        #expect(desk.closes[c]?.closeCode.code == 1000)
        #expect(desk.core.stats.rejected == 1)
    }

    @Test("pairing message 1 that is no pair request uses the code up; a rejection, not a pairing failure")
    func pairRequestMissing() throws {
        var desk = Desk()
        let secret = desk.issueCode()
        let c = desk.newConnection()
        desk.run(.connected(c, path: SpeakBridgeProtocol.pairPath, remote: "127.0.0.1"))
        var m = try InitiatorMachine(intent: .pair, localStatic: X25519PrivateKey(), desktopKey: Desk.publicKey,
                                     psk: secret, firstMessage: .hello(agent: "x"))
        desk.run(.frame(c, try m.start()))
        guard case .rejected(.protocolViolation)? = desk.closes[c] else { Issue.record("\(String(describing: desk.closes[c]))"); return }
        #expect(!desk.core.status.pairingActive)
        #expect(desk.core.stats.pairingFailures == 0 && desk.core.stats.rejected == 1)
    }

    @Test("a message a client may not send is answered unexpected; the session goes on")
    func unexpectedType() throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client])
        var s = try phone.open(&desk)
        _ = s.received(from: &desk)
        s.send(.ack(session: "s", seq: 1), to: &desk)
        guard case .error(.unexpected, _, _)? = s.received(from: &desk).first else { Issue.record("no unexpected"); return }
        s.send(.chunk(session: "s", Chunk(seq: 1, text: "x")), to: &desk)
        #expect(desk.submitted.count == 1 && desk.closes.isEmpty)
    }

    @Test("restart: live sessions beyond the bound are retired at once; a retired session is never accepted twice")
    func restoreTrims() throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client])
        let live = (0..<70).map { SessionLevel(device: phone.id, session: "s\($0)", seq: 5) }
        let retirements = desk.core.restore(live: live, retired: [SessionLevel(device: phone.id, session: "gone", seq: 9)])
        #expect(retirements.count == 6)
        #expect(desk.core.status.sessions.count == 64)
        var s = try phone.open(&desk, first: .chunks(session: "gone", (8...10).map { Chunk(seq: $0, text: "x") }))
        #expect(desk.submitted.last?.chunks.map(\.seq) == [10])
        #expect(desk.core.stats.duplicatesDropped == 2)
        _ = s.received(from: &desk)
    }

    @Test("a connection closed by the peer is forgotten: acks and held notices skip it, nothing is counted")
    func peerCloses() throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client])
        var s = try phone.open(&desk, first: .chunk(session: "s", Chunk(seq: 1, text: "x")))
        desk.run(.closed(s.id))
        desk.run(.durable([SessionLevel(device: phone.id, session: "s", seq: 1)]))
        #expect(s.received(from: &desk).isEmpty)
        #expect(desk.core.status.connections == 0)
        #expect(desk.core.stats == DesktopStats(chunksDelivered: 1))
    }
}

extension DesktopStats {
    init(chunksDelivered: UInt64) {
        self.init()
        self.chunksDelivered = chunksDelivered
    }
}
