import SpeakBridgeCrypto

/// What the client learns when a pairing completes.
public struct PairingResult: Sendable {
    public var desktopKey: X25519PublicKey
    public var desktopName: String
    /// The per-pair psk, in self-wiping storage.
    public var sessionKey: SymmetricKey
    /// A plain copy of the per-pair psk, for a `Peer` that stores it as bytes (the caller should wipe it).
    public var sessionPSK: [UInt8] { sessionKey.copyBytes() }
    public var desktopID: DeviceID { KeySchedule.deviceID(of: desktopKey) }
}

/// The capture client's side of one connection, as a value: frames in, actions out.
///
/// Flow (pairing):  start → msg1 {pair}; msg2 {pair-accept} → send {pair-confirm}; {paired} → paired(result), done.
/// Flow (session):  start → msg1 {hello}; msg2 {welcome} → established; then every decrypted message is handed out.
///                  The owner must send a transport message right after `.established` (`resume`, or a config
///                  request): the desktop counts the session as authenticated only once one decrypts, and sends
///                  nothing (no acks) before that.
public struct InitiatorMachine {
    public enum Action {
        case send([UInt8])
        case established
        case paired(PairingResult)
        case received(Message)
        case close(reason: String)
    }

    enum State {
        case idle(HandshakeState)
        case awaitingReply(HandshakeState)
        case awaitingPaired(NoiseTransport, PairingResult)
        /// The session's transport is `session` (not a payload here: reading or changing a payload copied the
        /// whole state, each CipherState's references retained and released, about 2,000 instructions a line).
        case established
        case closed
    }

    public let intent: ConnectionIntent
    let firstMessage: Message
    /// Pairing only: the code's secret, input of the per-pair psk; in self-wiping storage.
    let pairingSecret: SymmetricKey?
    let desktopKey: X25519PublicKey
    var state: State
    /// The transport while `state` is `.established` (nil otherwise); sealed and opened in place.
    var session: NoiseTransport?

    /// - Parameters:
    ///   - psk: the pairing secret (pairing) or the per-pair psk (session).
    ///   - localEphemeral: for test vectors only.
    ///   - cipher: the Noise cipher; AESGCM is what a browser speaks (subprotocol `speakbridge.v1.aesgcm`).
    public init(intent: ConnectionIntent, localStatic: X25519PrivateKey, desktopKey: X25519PublicKey,
                psk: SymmetricKey, firstMessage: Message,
                localEphemeral: X25519PrivateKey? = nil, cipher: NoiseCipher = .chaChaPoly) throws {
        self.intent = intent
        self.firstMessage = firstMessage
        self.pairingSecret = intent == .pair ? psk : nil
        self.desktopKey = desktopKey
        state = .idle(try HandshakeState(pattern: SpeakBridgeProtocol.noisePattern, cipher: cipher, role: .initiator,
                                          prologue: intent.prologue, localStatic: localStatic,
                                          remoteStatic: desktopKey, psk: psk, localEphemeral: localEphemeral))
    }

    /// The same, for a psk held as plain bytes: it is copied into wiped storage at once (the caller still owns,
    /// and should wipe, its array).
    public init(intent: ConnectionIntent, localStatic: X25519PrivateKey, desktopKey: X25519PublicKey,
                psk: [UInt8], firstMessage: Message,
                localEphemeral: X25519PrivateKey? = nil) throws {
        try self.init(intent: intent, localStatic: localStatic, desktopKey: desktopKey,
                      psk: try SymmetricKey(bytes: psk), firstMessage: firstMessage, localEphemeral: localEphemeral)
    }

    public var isEstablished: Bool {
        if case .established = state { return true }
        return false
    }

    /// Handshake message 1.
    public mutating func start() throws -> [UInt8] {
        guard case .idle(var handshake) = state else { throw CryptoError.handshakeState("already started") }
        let frame = try handshake.writeMessage(payload: MessageCodec.encode(firstMessage))
        state = .awaitingReply(handshake)
        return frame
    }

    public mutating func receive(_ frame: [UInt8]) -> [Action] {
        guard frame.count <= SpeakBridgeProtocol.maxFrameSize else { return fail("frame larger than 65535 bytes") }
        switch state {
        case .idle, .closed:
            return []
        case .awaitingReply(var handshake):
            let payload: [UInt8]
            do {
                payload = try handshake.readMessage(frame)
            } catch {
                return fail("the desktop's handshake reply did not verify (\(error)); is this the paired desktop?")
            }
            guard let transport = try? handshake.transport() else { return fail("handshake incomplete") }
            let reply = try? MessageCodec.decode(payload)
            switch (intent, reply) {
            case (.pair, .pairAccept(let name, _)?):
                guard let pairingSecret else { return fail("pairing without a pairing secret") }
                let psk = KeySchedule.sessionPSK(pairingSecret: pairingSecret,
                                                 pairingHandshakeHash: handshake.handshakeHash)
                let result = PairingResult(desktopKey: desktopKey, desktopName: name, sessionKey: psk)
                state = .awaitingPaired(transport, result)
                return encryptAndSend(.pairConfirm)
            case (.session, .welcome?):
                session = transport
                state = .established
                return [.established]
            default:
                return fail("unexpected handshake reply \(reply?.type ?? "(unreadable)")")
            }
        case .awaitingPaired(var transport, let result):
            guard let plaintext = try? transport.decrypt(frame), let message = try? MessageCodec.decode(plaintext)
            else { return fail("undecryptable pairing confirmation") }
            switch message {
            case .paired:
                state = .closed
                return [.paired(result)]
            case .error(let code, let text, _):
                return fail("the desktop refused: \(code): \(text)")
            default:
                return fail("expected paired, got \(message.type)")
            }
        case .established:
            let opened: [UInt8]?
            do {
                opened = try session?.decrypt(frame)  // in place: the nonce advances in `session` itself
            } catch {
                return fail("undecryptable message from the desktop")
            }
            guard let plaintext = opened else { return fail("no transport") }
            if let ack = CanonicalAck.decode(plaintext) { return [.received(ack)] }  // most frames: see there
            do {
                return [.received(try MessageCodec.decode(plaintext))]
            } catch {
                // Ignore what we cannot read (a newer desktop); the session goes on.
                return []
            }
        }
    }

    public mutating func encryptAndSend(_ message: Message) -> [Action] {
        switch seal(message) {
        case .frame(let frame): [.send(frame)]
        case .closed(let reason): [.close(reason: reason)]
        case .notReady: []
        }
    }

    /// What `seal` made of a message.
    public enum Sealed {
        case frame([UInt8])
        /// It could not be sealed: the machine is closed now (`encryptAndSend`'s `.close`).
        case closed(reason: String)
        /// No transport yet (or any more): nothing sent, nothing changed.
        case notReady
    }

    /// `encryptAndSend` without its array: the one frame (the per-line path of `LinkCore.send`).
    public mutating func seal(_ message: Message) -> Sealed {
        switch state {
        case .established, .awaitingPaired: return seal(encoded: MessageCodec.encode(message))
        default: return .notReady
        }
    }

    /// `seal` of a message already encoded (`OutboxWindow.Outgoing.encoded`: `MessageCodec.encode`'s bytes); in
    /// place on a session.
    public mutating func seal(encoded plaintext: consuming [UInt8]) -> Sealed {
        switch state {
        case .established:
            var frame = consume plaintext  // its only owner (`LinkCore.send(outgoing:)`): encrypted in place
            do {
                // The encoded bytes become the frame; `session` is changed in place (its nonce).
                guard (try session?.encrypt(inPlace: &frame)) != nil else {
                    return .closed(reason: closedReason("no transport"))
                }
            } catch {
                return .closed(reason: closedReason("encryption failed"))
            }
            return .frame(frame)
        case .awaitingPaired(var transport, let result):
            guard let frame = try? transport.encrypt(plaintext) else {
                return .closed(reason: closedReason("encryption failed"))
            }
            state = .awaitingPaired(transport, result)
            return .frame(frame)
        default:
            return .notReady
        }
    }

    mutating func closedReason(_ reason: String) -> String {
        close()
        return reason
    }

    mutating func fail(_ reason: String) -> [Action] {
        close()
        return [.close(reason: reason)]
    }

    /// Closed: the transport's keys go with it.
    mutating func close() {
        state = .closed
        session = nil
    }
}
