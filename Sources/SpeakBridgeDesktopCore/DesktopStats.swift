import SpeakBridgeProtocol

/// The desktop's counters, as `status --json` shows them. Every connection the core closes counts once, in the one
/// counter its `CloseReason.tally` names: `closedNormally` (the device said bye), `closedOnError` (the session
/// broke, the device reported an error or was over its backlog, a pairing could not be saved), `rejected` (the
/// desktop refused the device or the handshake: unknown path, no pairing code, unknown or revoked device — also a
/// live connection closed by revoke —, failed or replayed handshake, protocol violation in a handshake) or
/// `pairingFailures` (a pairing handshake with a wrong or stale code). Connections the peer closes are not counted.
public struct DesktopStats: Sendable, Equatable {
    public var chunksDelivered: UInt64 = 0
    public var duplicatesDropped: UInt64 = 0
    public var closedNormally: UInt64 = 0
    public var closedOnError: UInt64 = 0
    public var rejected: UInt64 = 0
    public var pairingFailures: UInt64 = 0

    public init() {}

    mutating func count(_ reason: CloseReason) {
        switch reason.tally {
        case .normal: closedNormally &+= 1
        case .error: closedOnError &+= 1
        case .rejected: rejected &+= 1
        case .pairingFailure: pairingFailures &+= 1
        }
    }
}

/// What the core knows for `status`: connections, sessions and counters (the shell adds what it owns).
public struct DesktopStatus: Sendable {
    public struct Session: Sendable, Equatable {
        public var device: DeviceID
        public var name: String
        public var session: String
        public var delivered: UInt64
    }

    public struct Connected: Sendable, Equatable {
        public var device: DeviceID
        public var name: String
        public var connections: Int
    }

    /// Open connections, authenticated or not.
    public var connections: Int
    /// Connections with an established session.
    public var authenticated: Int
    public var connected: [Connected]
    public var sessions: [Session]
    public var stats: DesktopStats
    public var pairingActive: Bool
}
