import SpeakBridgeCrypto
import SpeakBridgeProtocol

/// What happens to the desktop: the shell turns transport, pipeline, effect and control events into these.
public enum DesktopEvent: Sendable {
    /// The WebSocket upgrade on `path` was accepted from `remote` (an address, for the log only); `route` says
    /// which cipher the subprotocol chose and whether it came through the browser route.
    case connected(ConnectionID, path: String, remote: String, route: ConnectionRoute = .native)
    /// One complete WebSocket message.
    case frame(ConnectionID, [UInt8])
    /// The connection is gone (closed by either side).
    case closed(ConnectionID)
    /// Time passed (a pairing code may expire).
    case tick
    /// The answer of the delivery pipeline to a `.submit` of this connection: `.pause` when its device went over
    /// the high-water mark.
    case pressure(ConnectionID, DeviceID, BacklogMeter.Pressure)
    /// Every sink took these sessions through `seq`, durably: their ack levels.
    case durable([SessionLevel])
    /// These devices' backlogs fell to the low-water mark.
    case drained([DeviceID])
    /// `sink` holds these sessions from `seq` on (the first chunk it has not taken), and says why.
    case sinkHeld(sink: String, reason: String, [SessionLevel])
    /// The result of `.persistPeer`: the pairing of that connection is saved (as a device of `kind`), or it
    /// could not be.
    case pairingSaved(ConnectionID, PairingOutcome, kind: DeviceKind = .native)
    case pairingNotSaved(ConnectionID, PairingOutcome, message: String, hint: String?)
    /// What the config module answered a `.configOpened` or `.configRequest` of this connection.
    case configReplies(ConnectionID, [Message])
    /// `speakbridge pair`: offer this secret until `expiry` (seconds since 1970); `kind` `browser` for
    /// `pair --web` (a code the native route does not take: PairingCodeState).
    case pairingCodeIssued(SymmetricKey, expiry: Double, kind: DeviceKind = .native)
    /// `speakbridge devices revoke`: the device is removed from the saved peers.
    case revoked(DeviceID)
}

/// What the shell must do. Carried out in order; none waits on the network or a disk in the core.
public enum DesktopAction: Sendable {
    case send(ConnectionID, [UInt8])
    case close(ConnectionID, CloseReason)
    /// The connection's handshake is complete (the transport may stop its handshake timer).
    case markAuthenticated(ConnectionID, device: DeviceID)
    case pauseReading(ConnectionID)
    case resumeReading(ConnectionID)
    /// Hand these accepted chunks to every sink; answer with `.pressure`.
    case submit(ConnectionID, DeviceID, session: String, [Chunk])
    /// A live session was retired by the ledger: drop its delivery state (it has nothing in flight).
    case retire(DeviceID, SessionLedger.Retirement)
    /// A revoked device: drop all its delivery state.
    case forgetDelivery(DeviceID)
    /// Save this pairing (answer with `.pairingSaved` or `.pairingNotSaved`); `name`, `kind` and `agent` are
    /// what to store (`kind`/`agent` from the connection's `ConnectionRoute`).
    case persistPeer(ConnectionID, PairingOutcome, name: String, kind: DeviceKind, agent: String?)
    /// The device opened a session: record when it was last seen (failure is not fatal).
    case touchPeer(X25519PublicKey)
    /// Config transfer: ask the config module (answer with `.configReplies`).
    case configOpened(ConnectionID, DeviceID, name: String)
    case configRequest(ConnectionID, DeviceID, name: String, type: String, body: JSONValue)
    case log(LogLine)
}
