import SpeakBridgeCrypto
import SpeakBridgeSupport

/// What the desktop knows when a connection asks something of it. Lookups only: no side effects (the owner
/// changes its ledgers and codes from the actions it gets back, never from inside these closures).
public struct ResponderContext {
    public var localStatic: X25519PrivateKey
    public var localName: String
    /// The secret of the pairing code currently shown, or nil when none is active.
    public var pairingSecret: () -> SymmetricKey?
    /// The per-pair psk of a paired, non-revoked device; nil refuses the device.
    public var sessionPSK: (X25519PublicKey) -> SymmetricKey?
    /// The last durably delivered sequence number of (device, session); 0 when none.
    public var delivered: (DeviceID, String) -> UInt64

    public init(localStatic: X25519PrivateKey, localName: String,
                pairingSecret: @escaping () -> SymmetricKey?,
                sessionPSK: @escaping (X25519PublicKey) -> SymmetricKey?,
                delivered: @escaping (DeviceID, String) -> UInt64) {
        self.localStatic = localStatic
        self.localName = localName
        self.pairingSecret = pairingSecret
        self.sessionPSK = sessionPSK
        self.delivered = delivered
    }
}

/// A pairing, as the desktop records it once the client's first transport message decrypted.
public struct PairingOutcome: Sendable {
    public var peerKey: X25519PublicKey
    public var peerName: String
    /// The per-pair psk, in self-wiping storage.
    public var sessionKey: SymmetricKey
    /// A plain copy of the per-pair psk, for a `Peer` that stores it as bytes (the caller should wipe it).
    public var sessionPSK: [UInt8] { sessionKey.copyBytes() }
    public var deviceID: DeviceID { KeySchedule.deviceID(of: peerKey) }
}

/// The desktop's side of one connection, as a value: frames in, actions out. It never touches a socket,
/// a file or a clock; its owner (`DesktopCore`) carries the actions out.
///
/// Flow (pairing):  msg1 (psk = code secret) → consumePairingCode, send msg2 → pair-confirm → pairingConfirmed, send
///                  paired (which the owner holds back until the pairing is saved).
/// Flow (session):  msg1 (psk chosen by the initiator's static key) → send msg2 → the initiator's first transport
///                  message decrypts → authenticated → resume / chunk / chunks / bye / error (closes, also when
///                  malformed); `acknowledge` turns durable delivery into acks. Every close carries a `CloseReason`.
/// Message 1 alone proves nothing: anyone who recorded it can replay it (its payload decrypts again). Only a
/// transport message proves the sender holds the ephemeral key of this handshake, so until one decrypts the
/// connection stays unauthenticated: nothing is sent on it but message 2, and no action but `.send` comes out.
public struct ResponderMachine {
    public enum Action {
        case send([UInt8])
        /// The initiator's first transport message decrypted: the connection belongs to this paired device now
        /// (the transport may stop its handshake timer). Always comes before what that message asks for.
        case authenticated(DeviceID, X25519PublicKey)
        /// Message 1 decrypted under the pairing secret: the code is used up now (single use).
        case consumePairingCode
        /// A pairing handshake failed on message 1 (wrong or stale secret): counts against the code.
        case pairingAttemptFailed
        /// The client confirmed the pairing. The `.send` that follows in the same batch carries `paired`: the
        /// owner sends it only once the pairing is saved (and closes with `.cannotSavePairing` if it cannot be).
        case pairingConfirmed(PairingOutcome)
        case deliver(DeviceID, session: String, [Chunk])
        /// A `config-*` message from an authenticated device, for the config module.
        case config(DeviceID, type: String, body: JSONValue)
        /// The device's `resume` of `session` was answered (the `.send` before it): what the owner has to tell about
        /// that session (a sink holding its chunks) goes after the answer.
        case resumed(DeviceID, session: String)
        /// Close the connection (the reason gives the close code, the log line and the counter).
        case close(CloseReason)
    }

    enum State {
        case awaitingHello(HandshakeState?)
        case awaitingPairConfirm(NoiseTransport, PairingOutcome)
        case paired(NoiseTransport)
        /// Message 2 sent; waiting for the initiator's first transport message (which might never come: replay).
        /// Keeps the psk message 1 was read with, to check the device is still paired under it when that comes.
        case awaitingFirstTransport(NoiseTransport, DeviceID, X25519PublicKey, SymmetricKey)
        /// The session's transport is `session` (not a payload here: reading or changing a payload copied the
        /// whole state, each CipherState's references retained and released, about 800 instructions a line).
        case established(DeviceID)
        case closed
    }

    public let intent: ConnectionIntent
    var context: ResponderContext
    /// The transport while `state` is `.established` (nil otherwise); sealed and opened in place.
    var session: NoiseTransport?
    var state: State
    /// The Noise cipher functions, chosen by the WebSocket subprotocol (AESGCM for browsers).
    public let cipher: NoiseCipher
    /// The session ID of the last chunk message `receiveFrame` read: the next one with the same bytes reuses this
    /// `String` (`MessageCodec.decodeCanonical(_:knownSession:)`), so a session's lines share one string.
    var lastSession: String?

    public init(intent: ConnectionIntent, context: ResponderContext, cipher: NoiseCipher = .chaChaPoly) {
        self.intent = intent
        self.context = context
        self.cipher = cipher
        self.state = .awaitingHello(nil)
    }

    public var isEstablished: Bool {
        if case .established = state { return true }
        return false
    }

    public var peer: DeviceID? {
        if case .established(let id) = state { return id }
        return nil
    }

    /// `receive(frame)` with `context` instead of the one given at init, for this frame only (an owner whose state
    /// the lookups read passes a fresh snapshot each time, and nothing of it stays in the machine).
    public mutating func receive(_ frame: [UInt8], with context: ResponderContext) -> [Action] {
        let kept = self.context
        self.context = context
        defer { self.context = kept }
        return receive(frame)
    }

    /// `receive(frame, with: make())`, but on an established connection (every chunk) the context is made only
    /// when the message needs it (a `resume`'s ack level): a chunk makes, copies and releases no context.
    public mutating func receive(_ frame: [UInt8], context make: () -> ResponderContext) -> [Action] {
        guard case .established(let device) = state, frame.count <= SpeakBridgeProtocol.maxFrameSize else {
            return receive(frame, with: make())
        }
        return receiveEstablished(frame, device) { make().delivered($0, $1) }
    }

    /// What `receive(frame, context:)` asks for, with the common case apart: a chunk message on an established
    /// connection (every line) is `.deliver` itself, not a one-element `[Action]` array (one allocation and its
    /// release per line less). `.actions` is everything else, exactly as `receive` returns it.
    public enum Received {
        case deliver(DeviceID, session: String, [Chunk])
        case actions([Action])
    }

    /// `receive(frame, context: make)`, with a chunk message as `.deliver` (see `Received`). The same state changes
    /// and the same actions: `.deliver(d, s, c)` is exactly `.actions([.deliver(d, session: s, c)])`.
    public mutating func receiveFrame(_ frame: [UInt8], context make: () -> ResponderContext) -> Received {
        guard case .established(let device) = state,
              frame.count <= SpeakBridgeProtocol.maxFrameSize else {
            return .actions(receive(frame, context: make))
        }
        var closing: [Action] = []
        guard let plaintext = openEstablished(frame, device, orClose: &closing) else { return .actions(closing) }
        // `MessageCodec.decode` tries the canonical form first too: a chunk message in that form decodes to the
        // same message here; anything else goes the usual way (which reads it again, a rare message).
        switch MessageCodec.decodeCanonical(plaintext, knownSession: lastSession) {
        case let .chunk(session, chunk)?:
            lastSession = session
            return .deliver(device, session: session, [chunk])
        case let .chunks(session, chunks)?:
            lastSession = session
            return .deliver(device, session: session, chunks)
        default:
            return .actions(handleSessionMessage(plaintext, from: device) { make().delivered($0, $1) })
        }
    }

    public mutating func receive(_ frame: [UInt8]) -> [Action] {
        guard frame.count <= SpeakBridgeProtocol.maxFrameSize else {
            return fail(.rejected(.protocolViolation("frame larger than 65535 bytes")))
        }
        switch state {
        case .awaitingHello:
            return intent == .pair ? readPairingHello(frame) : readSessionHello(frame)
        case .awaitingPairConfirm(var transport, let outcome):
            guard let message = decrypt(frame, with: &transport) else {
                return fail(.rejected(.handshakeFailed("undecryptable pairing confirmation")))
            }
            guard message == .pairConfirm else {
                return fail(.rejected(.protocolViolation("expected pair-confirm, got \(message.type)")))
            }
            state = .paired(transport)
            var actions: [Action] = [.pairingConfirmed(outcome)]
            actions += encryptAndSend(.paired)
            return actions
        case .paired:
            return fail(.rejected(.protocolViolation("unexpected message after pairing")))
        case .awaitingFirstTransport(var transport, let device, let key, let psk):
            guard let plaintext = try? transport.decrypt(frame) else {
                return fail(.rejected(.replayedHandshake))
            }
            // Revoked (or paired again, with a new psk) since message 1: refused like an unknown device.
            guard let current = context.sessionPSK(key), current == psk else {
                return fail(.rejected(.revokedDuringHandshake(device)))
            }
            session = transport
            state = .established(device)
            return [.authenticated(device, key)] + handleSessionMessage(plaintext, from: device, delivered: context.delivered)
        case .established(let device):
            return receiveEstablished(frame, device, delivered: context.delivered)
        case .closed:
            return []
        }
    }

    /// The daemon delivered `session` through `seq` to every sink and made that durable.
    public mutating func acknowledge(session: String, through seq: UInt64) -> [Action] {
        encryptAndSend(.ack(session: session, seq: seq))
    }

    /// One ack on an established connection, as one action and without building a `Message` (`AckEncoder`): the
    /// desktop sends one per fsync and device, which with many devices streaming is one per line. `.send(frame)`;
    /// `.close` when encryption failed (the machine is closed then, as `encryptAndSend` does); nil when the
    /// connection is not established (nothing is sent, as `acknowledge` sends nothing then).
    public mutating func acknowledgeFrame(session: String, through seq: UInt64) -> Action? {
        guard case .established = state else { return nil }
        guard let frame = try? self.session?.encrypt(AckEncoder.encode(session: session, seq: seq)) else {
            return fail(.failed(.internalError("encryption failed"))).first
        }
        return .send(frame)
    }

    /// Sends any message (errors, resume answers) on an established connection.
    public mutating func encryptAndSend(_ message: Message) -> [Action] {
        let bytes = MessageCodec.encode(message)
        switch state {
        case .established:
            guard let frame = try? session?.encrypt(bytes) else { return fail(.failed(.internalError("encryption failed"))) }
            return [.send(frame)]
        case .awaitingPairConfirm(var transport, let outcome):
            guard let frame = try? transport.encrypt(bytes) else { return fail(.failed(.internalError("encryption failed"))) }
            state = .awaitingPairConfirm(transport, outcome)
            return [.send(frame)]
        case .paired(var transport):
            guard let frame = try? transport.encrypt(bytes) else { return fail(.failed(.internalError("encryption failed"))) }
            state = .paired(transport)
            return [.send(frame)]
        case .awaitingHello, .awaitingFirstTransport, .closed:
            return []
        }
    }

    // MARK: - Handshakes

    mutating func readPairingHello(_ frame: [UInt8]) -> [Action] {
        guard let psk = context.pairingSecret() else {
            return fail(.rejected(.pairingCodeGone))
        }
        var handshake: HandshakeState
        let payload: [UInt8]
        do {
            handshake = try HandshakeState(pattern: SpeakBridgeProtocol.noisePattern, cipher: cipher, role: .responder,
                                           prologue: ConnectionIntent.pair.prologue,
                                           localStatic: context.localStatic, psk: psk)
            payload = try handshake.readMessage(frame)
        } catch {
            state = .closed
            return [.pairingAttemptFailed, .close(.pairingFailed("\(error)"))]
        }
        guard case .pair(let name)? = try? MessageCodec.decode(payload), let peerKey = handshake.remoteStaticKey else {
            state = .closed
            return [.consumePairingCode, .close(.rejected(.protocolViolation("pairing message 1 did not carry a pair request")))]
        }
        let reply = MessageCodec.encode(.pairAccept(name: context.localName,
                                                    id: KeySchedule.deviceID(of: context.localStatic.publicKey).description))
        do {
            let message2 = try handshake.writeMessage(payload: reply)
            let transport = try handshake.transport()
            let outcome = PairingOutcome(
                peerKey: peerKey, peerName: name,
                sessionKey: KeySchedule.sessionPSK(pairingSecret: psk, pairingHandshakeHash: handshake.handshakeHash))
            state = .awaitingPairConfirm(transport, outcome)
            return [.consumePairingCode, .send(message2)]
        } catch {
            return fail(.failed(.internalError("pairing handshake failed: \(error)")))
        }
    }

    mutating func readSessionHello(_ frame: [UInt8]) -> [Action] {
        var handshake: HandshakeState
        let payload: [UInt8]
        let lookup = context.sessionPSK
        var used: SymmetricKey?
        do {
            handshake = try HandshakeState(pattern: SpeakBridgeProtocol.noisePattern, cipher: cipher, role: .responder,
                                           prologue: ConnectionIntent.session.prologue,
                                           localStatic: context.localStatic)
            payload = try handshake.readMessage(frame, pskResolver: { key in
                used = lookup(key)
                return used
            })
        } catch CryptoError.unknownPeer {
            return fail(.rejected(.unknownDevice))
        } catch {
            return fail(.rejected(.handshakeFailed("session handshake failed: \(error)")))
        }
        guard let peerKey = handshake.remoteStaticKey, let psk = used else {
            return fail(.rejected(.handshakeFailed("no initiator key")))
        }
        let device = KeySchedule.deviceID(of: peerKey)
        guard case .hello? = try? MessageCodec.decode(payload) else {
            return fail(.rejected(.protocolViolation("session message 1 from \(device) did not carry hello")))
        }
        do {
            let message2 = try handshake.writeMessage(payload: MessageCodec.encode(.welcome))
            state = .awaitingFirstTransport(try handshake.transport(), device, peerKey, psk)
            return [.send(message2)]
        } catch {
            return fail(.failed(.internalError("session handshake failed: \(error)")))
        }
    }

    // MARK: - Session

    /// A transport message on an established connection; `delivered` answers a `resume`.
    mutating func receiveEstablished(_ frame: [UInt8], _ device: DeviceID,
                                     delivered: (DeviceID, String) -> UInt64) -> [Action] {
        var closing: [Action] = []
        guard let plaintext = openEstablished(frame, device, orClose: &closing) else { return closing }
        return handleSessionMessage(plaintext, from: device, delivered: delivered)
    }

    /// A transport frame of the established session, opened in place (the nonce advances in `session` itself);
    /// nil when it does not open, with the machine closed and its close in `closing`.
    mutating func openEstablished(_ frame: [UInt8], _ device: DeviceID, orClose closing: inout [Action]) -> [UInt8]? {
        do {
            if let plaintext = try session?.decrypt(frame) { return plaintext }
            closing = fail(.failed(.internalError("no transport")))
        } catch {
            closing = fail(.failed(.undecryptable(device)))
        }
        return nil
    }

    mutating func handleSessionMessage(_ plaintext: [UInt8], from device: DeviceID,
                                       delivered: (DeviceID, String) -> UInt64) -> [Action] {
        let message: Message
        do {
            message = try MessageCodec.decode(plaintext)
        } catch {
            // A client's `error` closes the session whether or not it is well-formed (PROTOCOL.md, "Errors");
            // any other message that does not decode is answered and the session goes on.
            if MessageCodec.typeOfUndecodable(plaintext) == "error" {
                return fail(.failed(.peerError(device, .malformed, error.description)))
            }
            // Bounded as the peer's decoder bounds it (the description can quote what the peer sent).
            let text = PeerText.utf8Prefix(error.description, maxBytes: MessageCodec.maxErrorMessageBytes)
            let answer = encryptAndSend(.error(code: error.code, message: text, expected: nil))
            // A refused chunk message also ends the connection (after the error): the desktop accepts forward
            // jumps, so the ack of a later chunk on it would cover this one, and a client that drops what is acked
            // would lose it. After reconnecting, `resume` tells the client where to resend from.
            if let type = MessageCodec.typeOfUndecodable(plaintext), type == "chunk" || type == "chunks" {
                return answer + fail(.failed(.chunkRefused(device, error.code)))
            }
            return answer
        }
        switch message {
        case .resume(let session, _):
            let answer = encryptAndSend(.resume(session: session, delivered: delivered(device, session)))
            return answer.isEmpty ? answer : answer + [.resumed(device, session: session)]
        case let .chunk(session, chunk):
            return [.deliver(device, session: session, [chunk])]
        case let .chunks(session, chunks):
            return [.deliver(device, session: session, chunks)]
        case let .config(type, body):
            return [.config(device, type: type, body: body)]
        case .bye:
            return fail(.bye(device))
        case .error(let code, let text, _):
            return fail(.failed(.peerError(device, code, text)))
        default:
            return encryptAndSend(.error(code: .unexpected,
                                         message: "\(message.type) is not valid in a session", expected: nil))
        }
    }

    func decrypt(_ frame: [UInt8], with transport: inout NoiseTransport) -> Message? {
        guard let plaintext = try? transport.decrypt(frame) else { return nil }
        return try? MessageCodec.decode(plaintext)
    }

    /// Closed: the transport's keys go with it.
    mutating func fail(_ reason: CloseReason) -> [Action] {
        state = .closed
        session = nil
        return [.close(reason)]
    }
}
