// handshakes.json: a pairing handshake and the session handshake that follows it, with fixed static and ephemeral
// keys, every message in hex, the handshake hash and the per-pair psk, then the first transport messages.
//
// Flow (both handshakes):
//   1. The client side is the package's own InitiatorMachine with an injected ephemeral key: message 1 and the
//      transport messages are exactly what `speakbridge join` / `send` would put on the wire.
//   2. The desktop side is HandshakeState (ResponderMachine draws a fresh ephemeral and cannot be fixed), fed the
//      same psk the daemon would pick, with the payloads the daemon writes.
//   3. Both sides must agree (payloads, psk, transport messages); any disagreement stops the generator.
import SpeakBridgeCrypto
import SpeakBridgeProtocol

enum HandshakeVectors {
    static let clientName = "pixel"
    static let desktopName = "desk"
    static let agent = "speakbridge-vectors/1"
    static let session = "s-0123456789abcdef"

    struct Step {
        var description: String
        var direction: String
        var kind: String
        var payload: [UInt8]
        var message: [UInt8]

        var json: JSONValue {
            .object([("description", description.json), ("direction", direction.json), ("kind", kind.json),
                     ("payload", payload.utf8Text.json), ("message", message.hexJSON)])
        }
    }

    static let toDesktop = "client->desktop"
    static let toClient = "desktop->client"

    static func sent(_ actions: [InitiatorMachine.Action]) throws -> [UInt8] {
        for case .send(let frame) in actions { return frame }
        throw GeneratorError("the initiator sent nothing: \(actions)")
    }

    static func keys(_ s: X25519PrivateKey, _ e: X25519PrivateKey, role: String) -> [(String, JSONValue)] {
        [("\(role)_static_private", s.rawRepresentation.hexJSON),
         ("\(role)_static_public", s.publicKey.rawRepresentation.hexJSON),
         ("\(role)_ephemeral_private", e.rawRepresentation.hexJSON),
         ("\(role)_ephemeral_public", e.publicKey.rawRepresentation.hexJSON)]
    }

    /// Both handshakes; the session one uses the psk the pairing one derived.
    static func document() throws -> JSONValue {
        let (pairing, sessionPSK) = try pairingHandshake()
        let session = try sessionHandshake(psk: sessionPSK)
        return .object([
            ("description", "SpeakBridge protocol v1 handshakes; see Pairing/PROTOCOL.md, \"Noise\"".json),
            ("protocol_name", SpeakBridgeProtocol.noisePattern.protocolName.json),
            ("handshakes", .array([pairing, session])),
        ])
    }

    static func pairingHandshake() throws -> (JSONValue, [UInt8]) {
        let desktop = FixedKeys.desktopStatic
        let client = FixedKeys.clientStatic
        let secret = FixedKeys.pairingSecret
        let code = try PairingCodeVectors.example()
        let desktopID = KeySchedule.deviceID(of: desktop.publicKey).description

        var initiator = try InitiatorMachine(intent: .pair, localStatic: client, desktopKey: desktop.publicKey,
                                             psk: secret, firstMessage: .pair(name: clientName),
                                             localEphemeral: FixedKeys.clientEphemeralPairing)
        var responder = try HandshakeState(pattern: SpeakBridgeProtocol.noisePattern, role: .responder,
                                           prologue: ConnectionIntent.pair.prologue, localStatic: desktop,
                                           psk: try SymmetricKey(bytes: secret),
                                           localEphemeral: FixedKeys.desktopEphemeralPairing)
        var steps: [Step] = []

        let message1 = try initiator.start()
        let payload1 = try responder.readMessage(message1)
        try require(try MessageCodec.decode(payload1) == .pair(name: clientName), "message 1 payload")
        try require(responder.remoteStaticKey == client.publicKey, "responder learned the client key")
        steps.append(Step(description: "handshake message 1 (-> e, es, s, ss, psk)", direction: toDesktop,
                          kind: "handshake", payload: payload1, message: message1))

        let payload2 = MessageCodec.encode(.pairAccept(name: desktopName, id: desktopID))
        let message2 = try responder.writeMessage(payload: payload2)
        let hash = responder.handshakeHash
        var desktopTransport = try responder.transport()
        steps.append(Step(description: "handshake message 2 (<- e, ee, se)", direction: toClient,
                          kind: "handshake", payload: payload2, message: message2))

        let confirm = try sent(initiator.receive(message2))
        let confirmPlain = try desktopTransport.decrypt(confirm)
        try require(try MessageCodec.decode(confirmPlain) == .pairConfirm, "pair-confirm")
        steps.append(Step(description: "transport message 1 of the client (nonce 0)", direction: toDesktop,
                          kind: "transport", payload: confirmPlain, message: confirm))

        let pairedPlain = MessageCodec.encode(.paired)
        let paired = try desktopTransport.encrypt(pairedPlain)
        var result: PairingResult?
        for case .paired(let r) in initiator.receive(paired) { result = r }
        guard let result else { throw GeneratorError("the initiator did not complete pairing") }
        steps.append(Step(description: "transport message 1 of the desktop (nonce 0)", direction: toClient,
                          kind: "transport", payload: pairedPlain, message: paired))

        let psk = KeySchedule.sessionPSK(pairingSecret: secret, pairingHandshakeHash: hash)
        try require(result.sessionPSK == psk, "both sides derive the same per-pair psk")

        var members: [(String, JSONValue)] = [
            ("name", "pairing".json),
            ("intent", "pair".json),
            ("path", ConnectionIntent.pair.path.json),
            ("prologue", ConnectionIntent.pair.prologue.hexJSON),
            ("prologue_text", ConnectionIntent.pair.prologue.utf8Text.json),
            ("pairing_code", code.encoded().json),
        ]
        members += keys(client, FixedKeys.clientEphemeralPairing, role: "client")
        members += keys(desktop, FixedKeys.desktopEphemeralPairing, role: "desktop")
        members += [
            ("client_id", KeySchedule.deviceID(of: client.publicKey).description.json),
            ("desktop_id", desktopID.json),
            ("psk", secret.hexJSON),
            ("messages", .array(steps.map(\.json))),
            ("handshake_hash", hash.hexJSON),
            ("session_psk_label", SpeakBridgeProtocol.sessionPSKLabel.json),
            ("session_psk", psk.hexJSON),
        ]
        return (.object(members), psk)
    }

    static func sessionHandshake(psk: [UInt8]) throws -> JSONValue {
        let desktop = FixedKeys.desktopStatic
        let client = FixedKeys.clientStatic
        var initiator = try InitiatorMachine(intent: .session, localStatic: client, desktopKey: desktop.publicKey,
                                             psk: psk, firstMessage: .hello(agent: agent),
                                             localEphemeral: FixedKeys.clientEphemeralSession)
        var responder = try HandshakeState(pattern: SpeakBridgeProtocol.noisePattern, role: .responder,
                                           prologue: ConnectionIntent.session.prologue, localStatic: desktop,
                                           localEphemeral: FixedKeys.desktopEphemeralSession)
        var steps: [Step] = []

        let message1 = try initiator.start()
        // The daemon picks the psk by the initiator's static key, learned in message 1 before the psk token.
        let payload1 = try responder.readMessage(message1, pskResolver: { key in
            key == client.publicKey ? try SymmetricKey(bytes: psk) : nil
        })
        try require(try MessageCodec.decode(payload1) == .hello(agent: agent), "hello")
        steps.append(Step(description: "handshake message 1 (-> e, es, s, ss, psk)", direction: toDesktop,
                          kind: "handshake", payload: payload1, message: message1))

        let payload2 = MessageCodec.encode(.welcome)
        let message2 = try responder.writeMessage(payload: payload2)
        let hash = responder.handshakeHash
        var desktopTransport = try responder.transport()
        steps.append(Step(description: "handshake message 2 (<- e, ee, se)", direction: toClient,
                          kind: "handshake", payload: payload2, message: message2))
        let established = initiator.receive(message2)
        try require(established.contains { if case .established = $0 { return true } else { return false } },
                    "session established")

        // Transport: the client's messages come from the InitiatorMachine, the desktop's from its transport.
        var clientNonce = 0
        var desktopNonce = 0
        func clientSends(_ message: Message, _ description: String) throws {
            let frame = try sent(initiator.encryptAndSend(message))
            let plain = try desktopTransport.decrypt(frame)
            try require(try MessageCodec.decode(plain) == message, "client message \(message.type) round-trips")
            steps.append(Step(description: "\(description) (client nonce \(clientNonce))", direction: toDesktop,
                              kind: "transport", payload: plain, message: frame))
            clientNonce += 1
        }
        func desktopSends(_ message: Message, _ description: String) throws {
            let plain = MessageCodec.encode(message)
            let frame = try desktopTransport.encrypt(plain)
            var received: Message?
            for case .received(let m) in initiator.receive(frame) { received = m }
            try require(received == message, "desktop message \(message.type) round-trips")
            steps.append(Step(description: "\(description) (desktop nonce \(desktopNonce))", direction: toClient,
                              kind: "transport", payload: plain, message: frame))
            desktopNonce += 1
        }
        try clientSends(.resume(session: session, delivered: nil), "the client asks where the session stands")
        try desktopSends(.resume(session: session, delivered: 0), "nothing delivered yet")
        try clientSends(.chunk(session: session, Chunk(seq: 1, text: "Hello from the phone.")), "one chunk")
        try clientSends(.chunks(session: session, [Chunk(seq: 2, text: "Second line,"),
                                                   Chunk(seq: 3, text: "third line.")]), "a batch of two")
        try desktopSends(.ack(session: session, seq: 1), "chunk 1 is in every sink and durable")
        try desktopSends(.ack(session: session, seq: 3), "chunks 2 and 3 too")
        try clientSends(.bye, "the client is done")

        var members: [(String, JSONValue)] = [
            ("name", "session".json),
            ("intent", "session".json),
            ("path", ConnectionIntent.session.path.json),
            ("prologue", ConnectionIntent.session.prologue.hexJSON),
            ("prologue_text", ConnectionIntent.session.prologue.utf8Text.json),
        ]
        members += keys(client, FixedKeys.clientEphemeralSession, role: "client")
        members += keys(desktop, FixedKeys.desktopEphemeralSession, role: "desktop")
        members += [
            ("psk", psk.hexJSON),
            ("psk_source", "session_psk of the pairing handshake above".json),
            ("messages", .array(steps.map(\.json))),
            ("handshake_hash", hash.hexJSON),
        ]
        return .object(members)
    }
}
