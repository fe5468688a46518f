// Noise HandshakeState (spec §5.3) for IK, IKpsk1 and IKpsk2 with 25519, ChaChaPoly and SHA-256.
//
// Flow (initiator / responder):
//   1. init: InitializeSymmetric(protocol_name), MixHash(prologue), MixHash(responder's static public key).
//   2. initiator writeMessage -> message 1 -> responder readMessage
//        (the responder may pick the psk here, through pskResolver, once it has decrypted the initiator's key).
//   3. responder writeMessage -> message 2 -> initiator readMessage.
//   4. After the last message both sides Split(); transport() hands out the oriented CipherStates once.
// Any error poisons the state: secrets are wiped and every later call throws `.handshakeState`.

/// One party's side of a Noise IK-family handshake. A value type: copying it copies the handshake, so keep one.
public struct HandshakeState: Sendable {
    public let pattern: NoiseHandshakePattern
    public let role: NoiseRole

    private var symmetric: SymmetricState
    /// s: the local static key pair (owned by the caller; never wiped here).
    private let s: X25519PrivateKey
    /// e: the local ephemeral key pair; injected only to replay test vectors. Dropped once the handshake ends.
    private var e: X25519PrivateKey?
    /// rs: the remote static public key.
    private var rs: X25519PublicKey?
    /// re: the remote ephemeral public key.
    private var re: X25519PublicKey?
    private var psk: SymmetricKey?
    /// Index into `pattern.messages` of the next message to write or read.
    private var nextMessage = 0
    private var failed = false
    private var handoff: TransportHandoff?
    /// The psk resolver did not know the initiator's key; message 1 is still processed to its end.
    private var unknownPeer = false
    /// Work done so far, for tests that check both rejection paths do the same (not secret, not for control).
    private(set) var dhOperations = 0
    private(set) var payloadDecryptions = 0

    /// Stands in for the psk of an unknown initiator: random per process, never written anywhere, never the psk
    /// of any pairing (a collision has probability 2^-256).
    private static let unknownPeerPSK = SymmetricKey.random()

    /// Initialize(handshake_pattern, initiator, prologue, s, e, rs, re, psk).
    ///
    /// - The initiator must pass `remoteStatic` (IK's pre-message `<- s`); the responder must not.
    /// - psk patterns: the initiator must pass `psk`. The responder either passes it or leaves it nil and
    ///   supplies a `pskResolver` to `readMessage` for message 1.
    /// - `localEphemeral` exists only to replay published test vectors; real handshakes leave it nil so a
    ///   fresh ephemeral key is generated.
    public init(pattern: NoiseHandshakePattern, cipher: NoiseCipher = .chaChaPoly, role: NoiseRole,
                prologue: [UInt8], localStatic: X25519PrivateKey,
                remoteStatic: X25519PublicKey? = nil, psk: SymmetricKey? = nil,
                localEphemeral: X25519PrivateKey? = nil) throws {
        try Sodium.ensureAvailable()
        guard cipher.isAvailable else { throw CryptoError.cipherUnavailable(cipher.rawValue) }
        switch role {
        case .initiator where remoteStatic == nil:
            throw CryptoError.handshakeState("the \(pattern.patternName) initiator needs the responder's static key")
        case .responder where remoteStatic != nil:
            throw CryptoError.handshakeState(
                "the \(pattern.patternName) responder learns the initiator's static key from message 1")
        default:
            break
        }
        if !pattern.usesPSK && psk != nil {
            throw CryptoError.handshakeState("\(pattern.patternName) has no psk token")
        }
        if pattern.usesPSK && role == .initiator && psk == nil {
            throw CryptoError.missingPSK
        }
        self.pattern = pattern
        self.role = role
        self.s = localStatic
        self.e = localEphemeral
        self.rs = remoteStatic
        self.psk = psk
        // Calls InitializeSymmetric(protocol_name).
        symmetric = SymmetricState(protocolName: pattern.protocolName(cipher: cipher), cipher: cipher)
        // Calls MixHash(prologue).
        symmetric.mixHash(prologue)
        // Calls MixHash() once for each public key listed in the pre-messages: "<- s", the responder's static key.
        switch role {
        case .initiator: symmetric.mixHash(remoteStatic?.rawRepresentation ?? [])
        case .responder: symmetric.mixHash(localStatic.publicKey.rawRepresentation)
        }
    }

    /// True once the last handshake message has been written or read successfully.
    public var isHandshakeComplete: Bool { !failed && handoff != nil }

    /// The current handshake hash h; after completion it is GetHandshakeHash() and equal on both sides.
    public var handshakeHash: [UInt8] { symmetric.h }

    /// The peer's static key: given at init (initiator) or learned from message 1 (responder).
    public var remoteStaticKey: X25519PublicKey? { rs }

    /// The transport CipherStates, oriented for this role. Only after completion, and only once: a second call
    /// throws `.handshakeState`, so the same keys and nonces can never be used twice.
    public func transport() throws -> NoiseTransport {
        guard !failed else { throw CryptoError.handshakeState("handshake failed") }
        guard let handoff else { throw CryptoError.handshakeState("handshake not complete") }
        guard let transport = handoff.take() else { throw CryptoError.handshakeState("transport already taken") }
        return transport
    }

    // MARK: - Writing

    /// WriteMessage(payload, message_buffer): the next handshake message carrying `payload`.
    public mutating func writeMessage(payload: [UInt8]) throws -> [UInt8] {
        do {
            try checkTurn(writing: true)
            let tokens = pattern.messages[nextMessage]
            guard wireLength(of: tokens, payloadCount: payload.count) <= NoiseLimits.maxMessageLength else {
                throw CryptoError.messageTooLarge
            }
            var buffer: [UInt8] = []
            for token in tokens {
                switch token {
                case .e:
                    // Sets e (which must be empty) to GENERATE_KEYPAIR() (or the injected test key).
                    let ephemeral = e ?? X25519PrivateKey()
                    e = ephemeral
                    let publicKey = ephemeral.publicKey.rawRepresentation
                    // Appends e.public_key to the buffer. Calls MixHash(e.public_key).
                    buffer += publicKey
                    symmetric.mixHash(publicKey)
                    // psk handshakes (spec §9.2): also calls MixKey(e.public_key).
                    if pattern.usesPSK { try symmetric.mixKey(SecureBytes(publicKey)) }
                case .s:
                    // Appends EncryptAndHash(s.public_key) to the buffer.
                    buffer += try symmetric.encryptAndHash(s.publicKey.rawRepresentation)
                case .ee, .es, .se, .ss:
                    try mixDH(token)
                case .psk:
                    try mixPSK()
                }
            }
            // Appends EncryptAndHash(payload) to the buffer.
            buffer += try symmetric.encryptAndHash(payload)
            try finishMessage()
            return buffer
        } catch {
            fail()
            throw error
        }
    }

    // MARK: - Reading

    /// ReadMessage(message, payload_buffer): processes the peer's next handshake message and returns its payload.
    ///
    /// For a psk pattern whose psk was not given at init, the responder calls `pskResolver` with the initiator's
    /// static key as soon as message 1 has revealed it (before any psk token). A nil answer throws `.unknownPeer`,
    /// but only after the rest of the message (DH, psk, payload decryption) was processed with a dummy psk, so
    /// that it takes as long as a known key with a wrong psk; no resolver throws `.missingPSK`.
    public mutating func readMessage(
        _ message: [UInt8], pskResolver: ((X25519PublicKey) throws -> SymmetricKey?)? = nil
    ) throws -> [UInt8] {
        do {
            try checkTurn(writing: false)
            // Size before anything else: hostile input is bounded before any work is done.
            guard message.count <= NoiseLimits.maxMessageLength else { throw CryptoError.messageTooLarge }
            let tokens = pattern.messages[nextMessage]
            guard message.count >= wireLength(of: tokens, payloadCount: 0) else { throw CryptoError.messageTooShort }
            var reader = ByteReader(message)
            for token in tokens {
                switch token {
                case .e:
                    // Sets re (which must be empty) to the next DHLEN bytes from the message.
                    let publicKey = try reader.read(NoiseLimits.dhLength)
                    re = try X25519PublicKey(rawRepresentation: publicKey)
                    // Calls MixHash(re.public_key).
                    symmetric.mixHash(publicKey)
                    // psk handshakes (spec §9.2): also calls MixKey(re.public_key).
                    if pattern.usesPSK { try symmetric.mixKey(SecureBytes(publicKey)) }
                case .s:
                    // Sets temp to the next DHLEN + 16 bytes of the message if HasKey() == True, or to the next
                    // DHLEN bytes otherwise. Sets rs (which must be empty) to DecryptAndHash(temp).
                    let fieldLength = NoiseLimits.dhLength + (symmetric.hasKey ? NoiseLimits.tagLength : 0)
                    let temp = try reader.read(fieldLength)
                    let remoteStatic = try X25519PublicKey(rawRepresentation: try symmetric.decryptAndHash(temp))
                    rs = remoteStatic
                    // SpeakBridge: the responder picks the per-peer psk now that it knows who is calling.
                    // An unknown key gets the process's dummy psk and the message is processed to the end (ss,
                    // psk, payload decryption) exactly like a paired key with a wrong psk; only then is it
                    // reported as unknown. So how long a rejection takes does not tell which keys are paired.
                    if pattern.usesPSK && psk == nil {
                        guard let pskResolver else { throw CryptoError.missingPSK }
                        if let resolved = try pskResolver(remoteStatic) {
                            psk = resolved
                        } else {
                            psk = Self.unknownPeerPSK
                            unknownPeer = true
                        }
                    }
                case .ee, .es, .se, .ss:
                    try mixDH(token)
                case .psk:
                    try mixPSK()
                }
            }
            // Calls DecryptAndHash() on the remaining bytes of the message and stores the output into
            // payload_buffer.
            let payload: [UInt8]
            do {
                payloadDecryptions += 1
                payload = try symmetric.decryptAndHash(reader.remaining())
            } catch {
                throw unknownPeer ? CryptoError.unknownPeer : error
            }
            // Only reachable if the dummy psk decrypted a message (probability 2^-128): still unknown.
            if unknownPeer { throw CryptoError.unknownPeer }
            try finishMessage()
            return payload
        } catch {
            fail()
            throw error
        }
    }

    // MARK: - Steps shared by writing and reading

    /// The DH tokens, identical for writer and reader once roles are taken into account.
    private mutating func mixDH(_ token: NoiseToken) throws {
        dhOperations += 1
        let secret: SecureBytes
        switch (token, role) {
        case (.ee, _):
            // ee: Calls MixKey(DH(e, re)).
            secret = try dh(e, re)
        case (.es, .initiator):
            // es: Calls MixKey(DH(e, rs)) if initiator, MixKey(DH(s, re)) if responder.
            secret = try dh(e, rs)
        case (.es, .responder):
            secret = try dh(s, re)
        case (.se, .initiator):
            // se: Calls MixKey(DH(s, re)) if initiator, MixKey(DH(e, rs)) if responder.
            secret = try dh(s, re)
        case (.se, .responder):
            secret = try dh(e, rs)
        case (.ss, _):
            // ss: Calls MixKey(DH(s, rs)).
            secret = try dh(s, rs)
        default:
            throw CryptoError.handshakeState("not a DH token")
        }
        try symmetric.mixKey(secret)
    }

    /// psk: Calls MixKeyAndHash(psk).
    private mutating func mixPSK() throws {
        guard let psk else { throw CryptoError.missingPSK }
        try symmetric.mixKeyAndHash(psk.storage)
    }

    /// DH(key_pair, public_key); an all-zero result (low-order point) throws `.weakPublicKey`.
    private func dh(_ local: X25519PrivateKey?, _ remote: X25519PublicKey?) throws -> SecureBytes {
        guard let local, let remote else { throw CryptoError.handshakeState("DH token before its keys are known") }
        return try local.sharedSecret(with: remote)
    }

    private func checkTurn(writing: Bool) throws {
        guard !failed else { throw CryptoError.handshakeState("handshake failed earlier") }
        guard handoff == nil, nextMessage < pattern.messages.count else {
            throw CryptoError.handshakeState("handshake already complete")
        }
        let initiatorSends = nextMessage % 2 == 0
        let weSend = (role == .initiator) == initiatorSends
        guard weSend == writing else {
            throw CryptoError.handshakeState(writing ? "expected to read the peer's message, not write"
                                                     : "expected to write a message, not read")
        }
    }

    /// Length on the wire of a message made of `tokens` and a payload, given the current key state.
    private func wireLength(of tokens: [NoiseToken], payloadCount: Int) -> Int {
        var hasKey = symmetric.hasKey
        var length = 0
        for token in tokens {
            switch token {
            case .e:
                length += NoiseLimits.dhLength
                if pattern.usesPSK { hasKey = true }
            case .s:
                length += NoiseLimits.dhLength + (hasKey ? NoiseLimits.tagLength : 0)
            case .ee, .es, .se, .ss, .psk:
                hasKey = true
            }
        }
        return length + payloadCount + (hasKey ? NoiseLimits.tagLength : 0)
    }

    /// Advances to the next message; after the last one, Split() and wipe what the transport does not need.
    private mutating func finishMessage() throws {
        nextMessage += 1
        guard nextMessage == pattern.messages.count else { return }
        // Split(): c1 carries initiator -> responder, c2 responder -> initiator.
        let (c1, c2) = try symmetric.split()
        let transport = role == .initiator
            ? NoiseTransport(sending: c1, receiving: c2)
            : NoiseTransport(sending: c2, receiving: c1)
        handoff = TransportHandoff(transport)
        e = nil
        re = nil
        psk = nil
    }

    /// Poisons the state and drops every secret it holds.
    private mutating func fail() {
        failed = true
        symmetric.wipe()
        e = nil
        re = nil
        psk = nil
        _ = handoff?.take()
        handoff = nil
    }
}

/// Bounds-checked reads from a received message.
private struct ByteReader {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func read(_ count: Int) throws -> [UInt8] {
        guard bytes.count - offset >= count else { throw CryptoError.messageTooShort }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    func remaining() -> [UInt8] { Array(bytes[offset...]) }
}
