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
///
/// Secrets (API keys, tokens) leave only on a decision made on this machine: the default is `public`, so a
/// paired device (or whoever stole its key and psk) cannot pull them; the user either pushes one
/// (`config push --to DEVICE KEY`) or lets every paired device pull all of them (`config share all`).
public enum ShareMode: String, Sendable, CaseIterable {
    /// Every key that is not local-only, secrets included. Only when the user chose it (`config share all`).
    case all
    /// Only keys that are not secret (the default).
    case publicOnly = "public"
    /// Nothing: pulls are refused.
    case none
}

public struct PolicySettings: Sendable, Equatable {
    public var defaultPolicy: ConsentPolicy = .ask
    public var devices: [DeviceID: ConsentPolicy] = [:]
    public var share: ShareMode = .publicOnly

    public init() {}

    public func policy(for device: DeviceID) -> ConsentPolicy { devices[device] ?? defaultPolicy }
}
