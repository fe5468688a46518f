// HandshakeWalkthrough: one SpeakBridge pairing handshake, step by step, with the fixed keys of
// Pairing/vectors/handshakes.json (so every byte printed here can be found there).
//
//   swift run HandshakeWalkthrough
//
// Flow: both sides initialise Noise_IKpsk1_25519_ChaChaPoly_SHA256 with the prologue "speakbridge.v1 pair";
// the client writes message 1 (-> e, es, s, ss, psk) carrying {"type":"pair"}; the desktop reads it and answers
// message 2 (<- e, ee, se) carrying {"type":"pair-accept"}; both split into transport keys and derive the per-pair
// psk from the handshake hash.
import SpeakBridgeCrypto
import SpeakBridgeProtocol

func hex(_ bytes: [UInt8]) -> String { bytes.map { String($0, radix: 16).leftPad(2) }.joined() }

extension String {
    func leftPad(_ n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
    func rightPad(_ n: Int) -> String { self + String(repeating: " ", count: max(0, n - count)) }
}

func key(_ label: String) -> X25519PrivateKey {
    // Same derivation as the vectors: SHA-256 of an ASCII label.
    try! X25519PrivateKey(rawRepresentation: SHA256.hash(Array(label.utf8)))
}

func show(_ title: String, _ lines: [(String, String)]) {
    print("\n== \(title)")
    for (name, value) in lines { print("   \(name.rightPad(24)) \(value)") }
}

let desktop = key("speakbridge.v1 vectors: desktop static")
let client = key("speakbridge.v1 vectors: client static")
let clientEphemeral = key("speakbridge.v1 vectors: client ephemeral pairing")
let desktopEphemeral = key("speakbridge.v1 vectors: desktop ephemeral pairing")
let secret = SHA256.hash(Array("speakbridge.v1 vectors: pairing secret".utf8))
let prologue = ConnectionIntent.pair.prologue
let pattern = SpeakBridgeProtocol.noisePattern

do {
    show("0. what each side knows", [
        ("protocol", pattern.protocolName),
        ("prologue", "\"\(String(decoding: prologue, as: UTF8.self))\" = \(hex(prologue))"),
        ("desktop static public", hex(desktop.publicKey.rawRepresentation)),
        ("desktop device ID", KeySchedule.deviceID(of: desktop.publicKey).description),
        ("client static public", hex(client.publicKey.rawRepresentation)),
        ("client device ID", KeySchedule.deviceID(of: client.publicKey).description),
        ("psk = pairing secret", hex(secret) + "  (from the code, never sent)"),
    ])

    var initiator = try HandshakeState(pattern: pattern, role: .initiator, prologue: prologue, localStatic: client,
                                       remoteStatic: desktop.publicKey, psk: try SymmetricKey(bytes: secret),
                                       localEphemeral: clientEphemeral)
    var responder = try HandshakeState(pattern: pattern, role: .responder, prologue: prologue, localStatic: desktop,
                                       psk: try SymmetricKey(bytes: secret), localEphemeral: desktopEphemeral)
    show("1. Initialize: h = protocol name (padded), ck = h; MixHash(prologue); MixHash(desktop static)", [
        ("h (client)", hex(initiator.handshakeHash)),
        ("h (desktop)", hex(responder.handshakeHash)),
    ])

    let pairPayload = MessageCodec.encode(.pair(name: "pixel"))
    let message1 = try initiator.writeMessage(payload: pairPayload)
    show("2. client writes message 1: -> e, es, s, ss, psk", [
        ("payload", String(decoding: pairPayload, as: UTF8.self)),
        ("e (32)", hex(Array(message1[0..<32]))),
        ("encrypted s (32+16)", hex(Array(message1[32..<80]))),
        ("encrypted payload", hex(Array(message1[80...])) + " (\(pairPayload.count)+16)"),
        ("message 1 length", "\(message1.count) bytes"),
        ("h after message 1", hex(initiator.handshakeHash)),
    ])

    let read1 = try responder.readMessage(message1)
    show("3. desktop reads message 1 (a wrong psk would fail here; the desktop would close without answering)", [
        ("client key learned", hex(responder.remoteStaticKey?.rawRepresentation ?? [])),
        ("payload", String(decoding: read1, as: UTF8.self)),
        ("h after message 1", hex(responder.handshakeHash)),
    ])

    let acceptPayload = MessageCodec.encode(.pairAccept(name: "desk",
                                                        id: KeySchedule.deviceID(of: desktop.publicKey).description))
    let message2 = try responder.writeMessage(payload: acceptPayload)
    show("4. desktop writes message 2: <- e, ee, se", [
        ("payload", String(decoding: acceptPayload, as: UTF8.self)),
        ("e (32)", hex(Array(message2[0..<32]))),
        ("encrypted payload", hex(Array(message2[32...])) + " (\(acceptPayload.count)+16)"),
        ("message 2 length", "\(message2.count) bytes"),
    ])

    let read2 = try initiator.readMessage(message2)
    show("5. client reads message 2: only the holder of the desktop's static key can produce it", [
        ("payload", String(decoding: read2, as: UTF8.self)),
        ("handshake hash (client)", hex(initiator.handshakeHash)),
        ("handshake hash (desktop)", hex(responder.handshakeHash)),
        ("equal", "\(initiator.handshakeHash == responder.handshakeHash)"),
    ])

    var clientTransport = try initiator.transport()
    var desktopTransport = try responder.transport()
    let confirm = try clientTransport.encrypt(MessageCodec.encode(.pairConfirm))
    let confirmed = try desktopTransport.decrypt(confirm)
    let paired = try desktopTransport.encrypt(MessageCodec.encode(.paired))
    let pairedPlain = try clientTransport.decrypt(paired)
    show("6. Split(): transport messages (client->desktop key first; nonces from 0)", [
        ("client: pair-confirm", hex(confirm)),
        ("desktop decrypts", String(decoding: confirmed, as: UTF8.self) + "  -> desktop records the pairing"),
        ("desktop: paired", hex(paired)),
        ("client decrypts", String(decoding: pairedPlain, as: UTF8.self) + "  -> client records the pairing"),
    ])

    let psk = KeySchedule.sessionPSK(pairingSecret: secret, pairingHandshakeHash: responder.handshakeHash)
    show("7. per-pair psk for every later session", [
        ("HKDF ikm", "the pairing secret"),
        ("HKDF salt", "the handshake hash above"),
        ("HKDF info", "\"\(SpeakBridgeProtocol.sessionPSKLabel)\""),
        ("session psk", hex(psk)),
    ])
} catch {
    print("handshake walkthrough failed: \(error)")
}
