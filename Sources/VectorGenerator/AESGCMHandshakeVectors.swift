// handshakes-aesgcm.json: the browser route's handshakes — the same pairing and session as handshakes.json
// (same keys, ephemerals, prologues, psks and payloads), with AESGCM as the Noise cipher
// (`Noise_IKpsk1_25519_AESGCM_SHA256`, subprotocol `speakbridge.v1.aesgcm`).
//
// Flow: both sides are HandshakeState with an injected ephemeral (the InitiatorMachine speaks ChaChaPoly only);
// every message is checked on the other side; the per-pair psk from the pairing feeds the session.
import SpeakBridgeCrypto
import SpeakBridgeProtocol

enum AESGCMHandshakeVectors {
    typealias Step = HandshakeVectors.Step

    static func document() throws -> JSONValue {
        let (pairing, psk) = try handshake(intent: .pair, psk: FixedKeys.pairingSecret,
                                           ephemerals: (FixedKeys.clientEphemeralPairing, FixedKeys.desktopEphemeralPairing))
        let (session, _) = try handshake(intent: .session, psk: psk,
                                         ephemerals: (FixedKeys.clientEphemeralSession, FixedKeys.desktopEphemeralSession))
        return .object([
            ("description", "SpeakBridge protocol v1 handshakes with the AESGCM cipher (browsers); see Pairing/PROTOCOL.md, \"Noise\"".json),
            ("protocol_name", SpeakBridgeProtocol.noisePattern.protocolName(cipher: .aesGCM).json),
            ("subprotocol", SpeakBridgeProtocol.aesGCMSubprotocol.json),
            ("handshakes", .array([pairing, session])),
        ])
    }

    /// One handshake and its first transport messages; returns the document part and, for pairing, the per-pair psk.
    static func handshake(intent: ConnectionIntent, psk: [UInt8],
                          ephemerals: (client: X25519PrivateKey, desktop: X25519PrivateKey)) throws -> (JSONValue, [UInt8]) {
        let desktop = FixedKeys.desktopStatic
        let client = FixedKeys.clientStatic
        let session = HandshakeVectors.session
        let desktopID = KeySchedule.deviceID(of: desktop.publicKey).description
        var initiator = try HandshakeState(pattern: SpeakBridgeProtocol.noisePattern, cipher: .aesGCM, role: .initiator,
                                           prologue: intent.prologue, localStatic: client,
                                           remoteStatic: desktop.publicKey, psk: try SymmetricKey(bytes: psk),
                                           localEphemeral: ephemerals.client)
        var responder = try HandshakeState(pattern: SpeakBridgeProtocol.noisePattern, cipher: .aesGCM, role: .responder,
                                           prologue: intent.prologue, localStatic: desktop,
                                           psk: try SymmetricKey(bytes: psk), localEphemeral: ephemerals.desktop)
        var steps: [Step] = []
        let hello: Message = intent == .pair ? .pair(name: HandshakeVectors.clientName) : .hello(agent: HandshakeVectors.agent)
        let payload1 = MessageCodec.encode(hello)
        let message1 = try initiator.writeMessage(payload: payload1)
        try require(try responder.readMessage(message1) == payload1, "message 1 payload")
        steps.append(Step(description: "handshake message 1 (-> e, es, s, ss, psk)", direction: HandshakeVectors.toDesktop,
                          kind: "handshake", payload: payload1, message: message1))
        let answer: Message = intent == .pair ? .pairAccept(name: HandshakeVectors.desktopName, id: desktopID) : .welcome
        let payload2 = MessageCodec.encode(answer)
        let message2 = try responder.writeMessage(payload: payload2)
        try require(try initiator.readMessage(message2) == payload2, "message 2 payload")
        try require(initiator.handshakeHash == responder.handshakeHash, "same handshake hash")
        steps.append(Step(description: "handshake message 2 (<- e, ee, se)", direction: HandshakeVectors.toClient,
                          kind: "handshake", payload: payload2, message: message2))
        let hash = responder.handshakeHash
        var clientTransport = try initiator.transport()
        var desktopTransport = try responder.transport()
        var nonces = (client: 0, desktop: 0)
        func clientSends(_ message: Message, _ description: String) throws {
            let plain = MessageCodec.encode(message)
            let frame = try clientTransport.encrypt(plain)
            try require(try desktopTransport.decrypt(frame) == plain, "client \(message.type) round-trips")
            steps.append(Step(description: "\(description) (client nonce \(nonces.client))",
                              direction: HandshakeVectors.toDesktop, kind: "transport", payload: plain, message: frame))
            nonces.client += 1
        }
        func desktopSends(_ message: Message, _ description: String) throws {
            let plain = MessageCodec.encode(message)
            let frame = try desktopTransport.encrypt(plain)
            try require(try clientTransport.decrypt(frame) == plain, "desktop \(message.type) round-trips")
            steps.append(Step(description: "\(description) (desktop nonce \(nonces.desktop))",
                              direction: HandshakeVectors.toClient, kind: "transport", payload: plain, message: frame))
            nonces.desktop += 1
        }
        var sessionPSK: [UInt8] = []
        if intent == .pair {
            try clientSends(.pairConfirm, "pair-confirm")
            try desktopSends(.paired, "paired")
            sessionPSK = KeySchedule.sessionPSK(pairingSecret: psk, pairingHandshakeHash: hash)
        } else {
            try clientSends(.resume(session: session, delivered: nil), "the client asks where the session stands")
            try desktopSends(.resume(session: session, delivered: 0), "nothing delivered yet")
            try clientSends(.chunk(session: session, Chunk(seq: 1, text: "Hello from the browser.", lang: "en-US",
                                                           start: 0.5, end: 2.25)), "one chunk with lang, start and end")
            try desktopSends(.ack(session: session, seq: 1), "chunk 1 is in every sink and durable")
            try clientSends(.bye, "the client is done")
        }
        var members: [(String, JSONValue)] = [
            ("name", intent == .pair ? "pairing".json : "session".json),
            ("intent", intent.rawValue.json),
            ("path", intent.path.json),
            ("prologue", intent.prologue.hexJSON),
            ("prologue_text", intent.prologue.utf8Text.json),
        ]
        members += HandshakeVectors.keys(client, ephemerals.client, role: "client")
        members += HandshakeVectors.keys(desktop, ephemerals.desktop, role: "desktop")
        members += [("psk", psk.hexJSON), ("messages", .array(steps.map(\.json))), ("handshake_hash", hash.hexJSON)]
        if intent == .pair {
            members += [("session_psk_label", SpeakBridgeProtocol.sessionPSKLabel.json), ("session_psk", sessionPSK.hexJSON)]
        }
        return (.object(members), sessionPSK)
    }
}
