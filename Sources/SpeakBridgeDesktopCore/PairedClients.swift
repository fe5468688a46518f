import SpeakBridgeCrypto
import SpeakBridgeProtocol

/// A paired capture device, as the core needs it: its key, the psk its sessions use, its name for logs and status.
public struct PairedClient: Sendable {
    public var publicKey: X25519PublicKey
    public var name: String
    /// In self-wiping storage.
    public var psk: SymmetricKey
    /// `browser` devices send dictation only: their config messages are refused.
    public var kind: DeviceKind

    public var id: DeviceID { KeySchedule.deviceID(of: publicKey) }

    public init(publicKey: X25519PublicKey, name: String, psk: SymmetricKey, kind: DeviceKind = .native) {
        self.publicKey = publicKey
        self.name = name
        self.psk = psk
        self.kind = kind
    }
}

/// Every paired capture device, by key and by ID. The core's copy of what the shell persists: changed only by a
/// pairing that was saved and a revocation that was saved.
public struct PairedClients: Sendable {
    var byKey: [X25519PublicKey: PairedClient] = [:]
    /// The same clients by ID: `name(of:)` and `kind(of:)` run per delivered message, one lookup each.
    var byDevice: [DeviceID: PairedClient] = [:]

    public init(_ clients: [PairedClient] = []) {
        for client in clients { insert(client) }
    }

    public func psk(for key: X25519PublicKey) -> SymmetricKey? { byKey[key]?.psk }

    public func name(of device: DeviceID) -> String? { byDevice[device]?.name }

    /// nil for a device that is not paired (any more).
    public func kind(of device: DeviceID) -> DeviceKind? { byDevice[device]?.kind }

    public var count: Int { byKey.count }

    public mutating func insert(_ client: PairedClient) {
        byKey[client.publicKey] = client
        byDevice[client.id] = client
    }

    public mutating func remove(_ device: DeviceID) {
        if let client = byDevice.removeValue(forKey: device) { byKey[client.publicKey] = nil }
    }
}
