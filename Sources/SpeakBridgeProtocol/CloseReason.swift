/// Why the desktop closes a connection: one value per close, from which come the WebSocket close code the client
/// sees, the line in the desktop's log and the one counter `status` adds it to.
///
/// What a client sees is only the close code (and its short text): 1000 for everything a handshake or a session
/// decided (a `bye`, a refused or failed handshake — never with a hint why —, a pairing message 1 that came after
/// the code was used up, replaced or expired, a broken session), 1008 for a policy refusal outside the handshake
/// (unknown path, a pairing connection opened while no code is active, a device revoked once its handshake proved
/// it — connected, or between its message 1 and its first transport message —, a refused chunk message), 1011 when
/// a pairing could not be saved, 1013 when the device's undelivered backlog is at the hard limit, a chunk for a new
/// session met the device's session bound, or a connection kept sending config messages that the desktop had not
/// answered yet.
public enum CloseReason: Sendable, Equatable, CustomStringConvertible {
    /// The device said `bye`: a normal end.
    case bye(DeviceID)
    /// Refused: the connection never was, or no longer is, a session the desktop wants.
    case rejected(Rejection)
    /// A pairing handshake with a wrong or stale code (counts against the code).
    case pairingFailed(String)
    /// The session broke, or the desktop could not go on.
    case failed(Failure)

    public enum Rejection: Sendable, Equatable {
        /// The WebSocket path names neither pairing nor a session.
        case unknownPath
        /// A pairing connection opened while no pairing code is active.
        case noPairingCode
        /// Pairing message 1 arrived after the code was used up, replaced or expired.
        case pairingCodeGone
        /// Message 1 names a key that is not paired (never, or revoked).
        case unknownDevice
        /// The device was revoked (or paired again) between its message 1 and its first transport message: 1008
        /// "revoked" like a revocation while connected (its transport message proved the handshake; before
        /// 2026-12-07 it was closed with 1000).
        case revokedDuringHandshake(DeviceID)
        /// The device was revoked while connected.
        case revoked(DeviceID)
        /// Message 1 or a pairing confirmation did not verify.
        case handshakeFailed(String)
        /// Message 2 sent, but the first transport message did not decrypt (a replayed message 1).
        case replayedHandshake
        /// A message that is not valid at this point of a handshake.
        case protocolViolation(String)
        /// The device's oldest session connection, closed because it opened more than
        /// `DesktopCore.maxConnectionsPerDevice` (a device needs one; a move or a probe briefly two).
        case tooManyConnections(DeviceID)
    }

    public enum Failure: Sendable, Equatable {
        /// The device sent `error` (well-formed: its code and text; malformed: `.malformed` and why).
        case peerError(DeviceID, ProtocolErrorCode, String)
        /// A transport message of an established session did not decrypt.
        case undecryptable(DeviceID)
        /// The device's undelivered backlog is at the hard limit: it resends after reconnecting.
        case overloaded(DeviceID)
        /// A chunk message was refused (answered with `error`: malformed, too large, or a new session beyond the
        /// device's bound): the connection is closed after the error, so that a later chunk's ack on it cannot
        /// cover the refused one (the desktop accepts forward jumps). The client keeps it and resends after
        /// reconnecting.
        case chunkRefused(DeviceID, ProtocolErrorCode)
        /// The connection kept sending config messages while `DesktopCore.configAskedLimit` of them waited for the
        /// config module's answer (reading it was paused well before that).
        case configBacklog(DeviceID)
        /// The pairing was confirmed but could not be saved.
        case cannotSavePairing(String)
        /// Encryption or a handshake step failed on the desktop's side.
        case internalError(String)
    }

    /// The one `status` counter a close adds to.
    public enum Tally: Sendable, Equatable {
        case normal, rejected, pairingFailure, error
    }

    public var tally: Tally {
        switch self {
        case .bye: return .normal
        case .rejected: return .rejected
        case .pairingFailed: return .pairingFailure
        case .failed: return .error
        }
    }

    /// The WebSocket close code and text the client receives.
    public var closeCode: (code: UInt16, text: String) {
        switch self {
        case .rejected(.unknownPath): return (1008, "unknown path")
        case .rejected(.noPairingCode): return (1008, "no pairing code active")
        case .rejected(.revoked), .rejected(.revokedDuringHandshake): return (1008, "revoked")
        case .rejected(.tooManyConnections): return (1008, "too many connections of this device")
        case .failed(.overloaded): return (1013, "too much undelivered; try again later")
        case .failed(.configBacklog): return (1013, "too many config messages waiting; try again later")
        case .failed(.chunkRefused(_, .tooManySessions)): return (1013, "session refused; try again later")
        case .failed(.chunkRefused): return (1008, "chunk refused")
        case .failed(.cannotSavePairing): return (1011, "cannot save pairing")
        default: return (1000, "")
        }
    }

    /// For the local log (escaped by the logger: peer text may be in it); never contains secrets.
    public var description: String {
        switch self {
        case .bye(let device): return "\(device) said bye"
        case .pairingFailed(let why): return "pairing handshake failed (\(why)): wrong or stale code"
        case .rejected(let rejection):
            switch rejection {
            case .unknownPath: return "unknown path"
            case .noPairingCode: return "pairing attempt while no pairing code is active"
            case .pairingCodeGone: return "pairing attempt while no pairing code is active"
            case .revokedDuringHandshake(let device): return "session refused: \(device) was revoked during the handshake"
            case .unknownDevice: return "session refused: unknown or revoked device"
            case .revoked(let device): return "\(device) was revoked"
            case .handshakeFailed(let why): return "handshake failed: \(why)"
            case .replayedHandshake:
                return "session refused: the first transport message did not decrypt (replayed message 1?)"
            case .protocolViolation(let why): return why
            case .tooManyConnections(let device): return "\(device) has too many connections: its oldest is closed"
            }
        case .failed(let failure):
            switch failure {
            case let .peerError(device, code, text): return "\(device) reported error \(code): \(text.prefix(200))"
            case .undecryptable(let device): return "undecryptable transport message from \(device)"
            case .overloaded(let device): return "\(device): too much undelivered; refused until it drains"
            case .configBacklog(let device): return "\(device): too many config messages waiting for an answer"
            case let .chunkRefused(device, code):
                return "\(device): a chunk message was refused (\(code)); closed, so that no later ack covers it"
            case .cannotSavePairing(let why): return "pairing could not be saved: \(why)"
            case .internalError(let why): return why
            }
        }
    }
}

extension CloseReason.Rejection {
    /// Decided before the peer proved a paired key: a stranger can make as many of these as it likes.
    public var isBeforeAuthentication: Bool {
        switch self {
        case .unknownPath, .noPairingCode, .pairingCodeGone, .unknownDevice, .handshakeFailed, .replayedHandshake,
             .protocolViolation:
            return true
        case .revokedDuringHandshake, .revoked, .tooManyConnections:
            return false
        }
    }
}
