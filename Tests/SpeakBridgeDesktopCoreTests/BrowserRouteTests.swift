import SpeakBridgeCrypto
@testable import SpeakBridgeDesktopCore
@testable import SpeakBridgeProtocol
import Testing

/// The browser route through the core: the cipher a connection's subprotocol chose reaches its `ResponderMachine`
/// (an AESGCM `InitiatorMachine` pairs and opens a session, byte for byte), a pairing on the TLS listener is
/// saved as a `browser` device with its agent, and a browser device's config messages are refused in the core.
@Suite("Desktop core: the browser route")
struct BrowserRouteTests {
    static let browserRoute = ConnectionRoute(cipher: .aesGCM, kind: .browser, agent: "Chrome 156 on Android")

    @Test("AESGCM end to end through the core: pairing saved as browser with its agent, then a session delivers",
          .enabled(if: NoiseCipher.aesGCM.isAvailable, "this CPU has no AES-NI"))
    func aesGCMThroughTheCore() throws {
        var desk = Desk(takesConfig: true)
        let secret = desk.issueCode()
        var phone = Phone()
        let c = desk.newConnection()
        desk.run(.connected(c, path: SpeakBridgeProtocol.pairPath, remote: "127.0.0.1", route: Self.browserRoute))
        var pairing = try InitiatorMachine(intent: .pair, localStatic: phone.key, desktopKey: Desk.publicKey, psk: secret,
                                           firstMessage: .pair(name: "browser"), cipher: .aesGCM)
        desk.run(.frame(c, try pairing.start()))
        let message2 = desk.take(c)
        #expect(message2.count == 1, "the AESGCM message 1 was not answered")
        for frame in message2 {
            for confirm in Phone.sends(pairing.receive(frame)) { desk.run(.frame(c, confirm)) }
        }
        let (id, outcome, name, kind, agent) = try #require(desk.persisted.first)
        #expect(id == c && name == "browser" && kind == .browser && agent == "Chrome 156 on Android")
        desk.run(.pairingSaved(c, outcome, kind: kind))
        var result: PairingResult?
        for frame in desk.take(c) {
            for case .paired(let r) in pairing.receive(frame) { result = r }
        }
        phone.psk = try #require(result).sessionKey

        let s = desk.newConnection()
        desk.run(.connected(s, path: SpeakBridgeProtocol.sessionPath, remote: "127.0.0.1", route: Self.browserRoute))
        var machine = try InitiatorMachine(intent: .session, localStatic: phone.key, desktopKey: Desk.publicKey,
                                           psk: try #require(phone.psk), firstMessage: .hello(agent: "page"), cipher: .aesGCM)
        desk.run(.frame(s, try machine.start()))
        var session = Session(machine: machine, id: s)
        for frame in desk.take(s) { _ = session.machine.receive(frame) }
        #expect(session.machine.isEstablished)
        session.send(.resume(session: "web", delivered: nil), to: &desk)
        session.send(.chunks(session: "web", [Chunk(seq: 1, text: "from the browser")]), to: &desk)
        #expect(desk.submitted.map { $0.chunks.map(\.text) } == [["from the browser"]])
        #expect(desk.submitted.first?.device == phone.id)
        #expect(desk.configAsks.isEmpty, "a browser device's session was offered to the config module")
    }

    @Test("a ChaChaPoly message 1 on an AESGCM connection fails (and the reverse): no message 2",
          .enabled(if: NoiseCipher.aesGCM.isAvailable, "this CPU has no AES-NI"),
          arguments: [(NoiseCipher.chaChaPoly, NoiseCipher.aesGCM), (.aesGCM, .chaChaPoly)])
    func mismatchedCipher(client: NoiseCipher, route: NoiseCipher) throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client])
        let s = desk.newConnection()
        desk.run(.connected(s, path: SpeakBridgeProtocol.sessionPath, remote: "127.0.0.1",
                            route: ConnectionRoute(cipher: route, kind: .native)))
        var machine = try InitiatorMachine(intent: .session, localStatic: phone.key, desktopKey: Desk.publicKey,
                                           psk: try #require(phone.psk), firstMessage: .hello(agent: "x"), cipher: client)
        desk.run(.frame(s, try machine.start()))
        #expect(desk.take(s).isEmpty)
        #expect(desk.submitted.isEmpty && desk.authenticated.isEmpty)
    }

    @Test("a browser device's config-pull gets unknown-type 'config transfer is off for browser devices', never the config module")
    func browserConfigRefused() throws {
        let browser = Phone.paired()
        var record = browser.client
        record.kind = .browser
        let native = Phone.paired()
        var desk = Desk(clients: [record, native.client], takesConfig: true)

        var s = try browser.open(&desk)
        _ = s.received(from: &desk)
        s.send(.config(type: "config-pull", body: .object([("batch", .string("b1"))])), to: &desk)
        guard case .error(.unknownType, let message, nil)? = s.received(from: &desk).first else {
            Issue.record("no unknown-type error"); return
        }
        #expect(message == "config transfer is off for browser devices")
        #expect(desk.configAsks.isEmpty, "\(desk.configAsks)")
        #expect(desk.closes[s.id] == nil, "the refusal closed the connection")
        // Dictation still goes through on that connection.
        s.send(.chunks(session: "s", [Chunk(seq: 1, text: "still dictating")]), to: &desk)
        #expect(desk.submitted.map { $0.chunks.map(\.text) } == [["still dictating"]])

        // A native device of the same desktop still reaches the config module.
        var n = try native.open(&desk)
        _ = n.received(from: &desk)
        n.send(.config(type: "config-pull", body: .object([("batch", .string("b2"))])), to: &desk)
        guard case .configRequest(n.id, native.id, _, "config-pull", _)? = desk.configAsks.last else {
            Issue.record("\(desk.configAsks)"); return
        }
    }

    /// A browser-route connection under ChaChaPoly: the kind is what the rule looks at, not the cipher (no AES-NI needed).
    static let browserChaCha = ConnectionRoute(cipher: .chaChaPoly, kind: .browser, agent: "Chrome 156 on Android")

    @Test("a pair --web code is refused on the native route like no code: nothing saved, no failed attempt, the page still pairs with it")
    func browserCodeRefusedNatively() throws {
        var desk = Desk(takesConfig: true)
        let secret = desk.issueCode(kind: .browser)
        let (_, c) = try Phone().startPairing(&desk, secret: secret, name: "laptop")
        #expect(desk.closes[c] == .rejected(.noPairingCode))
        #expect(desk.persisted.isEmpty)
        #expect(desk.core.stats.pairingFailures == 0)
        #expect(desk.logs.contains { $0.message.contains("the active pairing code is for a browser (`pair --web`)") })
        #expect(desk.core.status.pairingActive, "a native peer cannot use up or kill the page's code")

        let (_, b) = try Phone().startPairing(&desk, secret: secret, name: "browser", route: Self.browserChaCha)
        let (id, _, _, kind, agent) = try #require(desk.persisted.first)
        #expect(id == b && kind == .browser && agent == "Chrome 156 on Android")
    }

    @Test("a native connection opened under a native code, then pair --web replaces it: its message 1 finds no code")
    func browserCodeIssuedAfterANativeConnectionOpened() throws {
        var desk = Desk()
        _ = desk.issueCode()
        let c = desk.newConnection()
        desk.run(.connected(c, path: SpeakBridgeProtocol.pairPath, remote: "127.0.0.1"))
        let secret = desk.issueCode(kind: .browser)
        var machine = try InitiatorMachine(intent: .pair, localStatic: X25519PrivateKey(), desktopKey: Desk.publicKey,
                                           psk: secret, firstMessage: .pair(name: "sneaky"))
        desk.run(.frame(c, try machine.start()))
        #expect(desk.closes[c] == .rejected(.pairingCodeGone))
        #expect(desk.frames[c, default: []].isEmpty && desk.persisted.isEmpty)
        #expect(desk.core.status.pairingActive && desk.core.stats.pairingFailures == 0)
    }

    @Test("a native code (pair) pairs on either route: a native device natively, a browser device on the TLS port")
    func nativeCodeOnBothRoutes() throws {
        var desk = Desk()
        let first = desk.issueCode()
        _ = try Phone().startPairing(&desk, secret: first, name: "laptop")
        let second = desk.issueCode()
        _ = try Phone().startPairing(&desk, secret: second, name: "page", route: Self.browserChaCha)
        #expect(desk.persisted.map(\.3) == [.native, .browser])
    }
}
