import SpeakBridgeCrypto
import SpeakBridgeProtocol

/// What the transport knows about a connection when it opens, as the core needs it: the Noise cipher its
/// subprotocol chose (`speakbridge.v1` → ChaChaPoly, `speakbridge.v1.aesgcm` → AESGCM) and whether it came
/// through the browser route's TLS listener (a device paired on it is saved as `browser`, with its user agent in
/// short). The shell fills it in from lws; nothing of lws reaches the core.
public struct ConnectionRoute: Sendable, Equatable {
    public var cipher: NoiseCipher
    public var kind: DeviceKind
    /// Browser connections: the user agent in short ("Chrome 156 on Android"), already escaped; for `devices`.
    public var agent: String?

    public init(cipher: NoiseCipher, kind: DeviceKind, agent: String? = nil) {
        self.cipher = cipher
        self.kind = kind
        self.agent = agent
    }

    /// The ws:// route of native clients.
    public static let native = ConnectionRoute(cipher: .chaChaPoly, kind: .native)
}
