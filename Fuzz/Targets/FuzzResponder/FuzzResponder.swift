// libFuzzer target: the desktop's side of a connection (`ResponderMachine.receive`) from message 1 on, for both
// intents, with the fixed keys of Pairing/vectors/ (so the vectors' own frames are valid seeds).
// Built only by `make fuzz` (Fuzz/run.sh); a normal `swift build` links it with an empty main.
//
// Input: byte 0 = flags (bit 0: intent session, else pair; bit 1: constructed, else raw), then records, each a
// 2-byte big-endian length and that many bytes (the last one takes what is left).
//   raw          every record is a frame as a stranger on the socket sends it (seeds: the vectors' frames);
//   constructed  an honest initiator with the vectors' client key encrypts each record: record 0 is the payload
//                of message 1, the others are transport plaintexts. This reaches the decoders behind the Noise
//                layer, which random frames never do.
// Invariants beyond "no crash": pairing actions only on the pair intent, session actions only on the session
// intent; nothing but silence after a close; raw frames (a stranger, or a replay of the vectors' recorded frames:
// the responder's ephemeral key is fresh) never authenticate, deliver, configure or confirm a pairing; message 1
// alone never authenticates, and the first transport message authenticates before anything else; every frame the
// responder sends decrypts on the initiator's side in order and decodes; message 1 is answered exactly when its
// payload is the right request; chunks handed to the daemon are the chunks the initiator sent; a completed pairing
// yields the initiator's key and the psk the initiator derives.
import SpeakBridgeCrypto
import SpeakBridgeProtocol

enum Keys {
    static func key(_ label: String) -> X25519PrivateKey {
        // Labels as in Pairing/vectors/README.md; a 32-byte SHA-256 digest is always a valid private key.
        try! X25519PrivateKey(rawRepresentation: SHA256.hash(Array("speakbridge.v1 vectors: \(label)".utf8)))
    }
    static let desktop = key("desktop static")
    static let client = key("client static")
    static let clientEphemeral = key("client ephemeral session")
    static let pairingSecret = SHA256.hash(Array("speakbridge.v1 vectors: pairing secret".utf8))
    /// `session_psk` of the pairing in Pairing/vectors/handshakes.json.
    static let sessionPSK = try! SymmetricKey(
        bytes: hex("589d074ced7de2c24ec0c3b7b1731788807dbd511c08b1365e2c58b7fc700dac"))
    static let pairingKey = try! SymmetricKey(bytes: pairingSecret)

    static func hex(_ s: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = s.startIndex
        while i < s.endIndex {
            let j = s.index(i, offsetBy: 2)
            out.append(UInt8(s[i..<j], radix: 16)!)
            i = j
        }
        return out
    }
}

func context() -> ResponderContext {
    let clientKey = Keys.client.publicKey
    return ResponderContext(localStatic: Keys.desktop, localName: "desk",
                            pairingSecret: { Keys.pairingKey },
                            sessionPSK: { $0 == clientKey ? Keys.sessionPSK : nil },
                            delivered: { _, _ in 0 })
}

func records(_ bytes: ArraySlice<UInt8>) -> [[UInt8]] {
    var rest = bytes
    var out: [[UInt8]] = []
    while !rest.isEmpty && out.count < 64 {
        guard rest.count >= 2 else { out.append(Array(rest)); break }
        let length = Int(rest[rest.startIndex]) << 8 | Int(rest[rest.startIndex + 1])
        rest = rest.dropFirst(2)
        out.append(Array(rest.prefix(length)))
        rest = rest.dropFirst(length)
    }
    return out
}

/// Checks what may appear for the intent, and that a closed machine stays silent.
struct Observer {
    let intent: ConnectionIntent
    var closed = false

    mutating func observe(_ actions: [ResponderMachine.Action]) {
        if closed { precondition(actions.isEmpty, "a closed responder acted again") }
        for action in actions {
            switch action {
            case .consumePairingCode, .pairingAttemptFailed, .pairingConfirmed:
                precondition(intent == .pair, "pairing action on a session connection")
            case .authenticated, .deliver, .config, .resumed:
                precondition(intent == .session, "session action on a pairing connection")
            case .close:
                closed = true
            case .send:
                break
            }
            if case let .deliver(_, session, chunks) = action {
                precondition(!chunks.isEmpty && MessageCodec.isValidSessionID(session), "invalid delivery")
            }
        }
    }
}

func sent(_ actions: [ResponderMachine.Action]) -> [[UInt8]] {
    actions.compactMap { if case .send(let f) = $0 { return f } else { return nil } }
}

func runRaw(_ intent: ConnectionIntent, _ frames: [[UInt8]]) {
    var responder = ResponderMachine(intent: intent, context: context())
    var observer = Observer(intent: intent)
    for frame in frames {
        let actions = responder.receive(frame)
        observer.observe(actions)
        for action in actions {
            switch action {
            case .authenticated, .deliver, .config, .pairingConfirmed, .resumed:
                fatalError("frames sent without this handshake's ephemeral key were accepted: \(action)")
            case .send, .close, .consumePairingCode, .pairingAttemptFailed:
                break
            }
        }
    }
}

func runConstructed(_ intent: ConnectionIntent, _ plaintexts: [[UInt8]]) {
    guard let first = plaintexts.first else { return }
    let psk = intent == .pair ? Keys.pairingKey : Keys.sessionPSK
    var initiator = try! HandshakeState(pattern: SpeakBridgeProtocol.noisePattern, role: .initiator,
                                        prologue: intent.prologue, localStatic: Keys.client,
                                        remoteStatic: Keys.desktop.publicKey, psk: psk,
                                        localEphemeral: Keys.clientEphemeral)
    guard let message1 = try? initiator.writeMessage(payload: first) else { return }  // payload too large
    var responder = ResponderMachine(intent: intent, context: context())
    var observer = Observer(intent: intent)
    let actions = responder.receive(message1)
    observer.observe(actions)
    precondition(!actions.contains { if case .authenticated = $0 { return true } else { return false } },
                 "message 1 alone authenticated the connection (a replay would too)")

    let request = try? MessageCodec.decode(first)
    let expected: Bool
    switch (intent, request) {
    case (.pair, .pair?), (.session, .hello?): expected = true
    default: expected = false
    }
    let replies = sent(actions)
    precondition(expected == !observer.closed, "message 1 answered wrongly (expected \(expected))")
    guard expected else { precondition(replies.isEmpty, "refused message 1 got a reply"); return }
    precondition(replies.count == 1, "message 1 needs exactly one reply")
    let reply: [UInt8]
    do {
        reply = try initiator.readMessage(replies[0])
    } catch {
        fatalError("the initiator cannot read message 2: \(error)")
    }
    switch (intent, try? MessageCodec.decode(reply)) {
    case (.pair, .pairAccept?), (.session, .welcome?): break
    default: fatalError("message 2 carries the wrong reply")
    }
    var transport = try! initiator.transport()
    var confirmed = false
    var firstTransport = true
    for plaintext in plaintexts.dropFirst() where !observer.closed {
        guard let frame = try? transport.encrypt(plaintext) else { return }
        let actions = responder.receive(frame)
        observer.observe(actions)
        if intent == .session && firstTransport {
            guard case .authenticated(_, let key)? = actions.first, key == Keys.client.publicKey else {
                fatalError("the first transport message did not authenticate the initiator first")
            }
        }
        firstTransport = false
        for frame in sent(actions) {
            guard let bytes = try? transport.decrypt(frame) else { fatalError("a reply does not decrypt in order") }
            precondition((try? MessageCodec.decode(bytes)) != nil, "a reply does not decode")
        }
        let message = try? MessageCodec.decode(plaintext)
        for action in actions {
            if case let .pairingConfirmed(outcome) = action {
                precondition(message == .pairConfirm && !confirmed, "pairing confirmed without pair-confirm")
                confirmed = true
                precondition(outcome.peerKey == Keys.client.publicKey, "pairing recorded the wrong key")
                precondition(outcome.sessionKey == KeySchedule.sessionPSK(pairingSecret: Keys.pairingKey,
                                                                         pairingHandshakeHash: initiator.handshakeHash),
                             "the two sides derived different session psks")
            }
            if case let .deliver(_, session, chunks) = action {
                switch message {
                case let .chunk(s, c)?: precondition(s == session && chunks == [c], "delivered another chunk")
                case let .chunks(s, cs)?: precondition(s == session && chunks == cs, "delivered other chunks")
                default: fatalError("delivered chunks the initiator did not send")
                }
            }
        }
        if intent == .pair && message == .pairConfirm && !observer.closed {
            precondition(confirmed, "pair-confirm did not confirm the pairing")
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResponder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let intent: ConnectionIntent = bytes[0] & 1 == 1 ? .session : .pair
    let parts = records(Array(bytes)[1...])
    if bytes[0] & 2 == 2 { runConstructed(intent, parts) } else { runRaw(intent, parts) }
    return 0
}
