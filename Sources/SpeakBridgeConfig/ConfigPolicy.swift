import SpeakBridgeProtocol

/// What happens to changes a peer sends. The policy is local trust: it is not a key, never offered, never applied.
public enum ConsentPolicy: String, Sendable, CaseIterable {
    /// Apply newer values at once.
    case accept
    /// Hold them as pending until `config accept` (the default).
    case ask
    /// Store nothing; the peer is told `denied`.
    case deny
}

/// What this installation answers when a paired device pulls (`config-pull`). Explicit pushes
/// (`config push`) send what the user named regardless; local-only keys never leave in any mode.
public enum ShareMode: String, Sendable, CaseIterable {
    /// Every key that is not local-only, secrets included (the default: the device was paired on purpose).
    case all
    /// Only keys that are not secret.
    case publicOnly = "public"
    /// Nothing: pulls are refused.
    case none
}

public struct PolicySettings: Sendable, Equatable {
    public var defaultPolicy: ConsentPolicy = .ask
    public var devices: [DeviceID: ConsentPolicy] = [:]
    public var share: ShareMode = .all

    public init() {}

    public func policy(for device: DeviceID) -> ConsentPolicy { devices[device] ?? defaultPolicy }
}
