import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore

public struct DaemonOptions: Sendable {
    public var home: Home
    /// Address to listen on ("0.0.0.0", "127.0.0.1", "::"), and port (0 = ephemeral).
    public var host: String
    public var port: Int
    public var sinks: [SinkSpec]
    /// `--raw`: do not sanitize peer text written to stdout / FIFO.
    public var raw: Bool
    /// Service name for mDNS; nil = "SpeakBridge <short ID>" (no user or host name unless asked).
    public var name: String?
    public var mdns: Bool
    /// Seconds a pairing code stays valid.
    public var pairingLifetime: Int
    /// Handles `config-*` messages (config transfer); nil answers them with an error.
    public var configHandler: (any PeerConfigHandler)?
    /// The browser route (WebFront.swift).
    public var web = WebFrontOptions()

    public init(home: Home, host: String, port: Int, sinks: [SinkSpec], raw: Bool, name: String?, mdns: Bool,
                pairingLifetime: Int = SpeakBridgeProtocol.pairingCodeLifetime) {
        self.pairingLifetime = pairingLifetime
        self.home = home
        self.host = host
        self.port = port
        self.sinks = sinks
        self.raw = raw
        self.name = name
        self.mdns = mdns
    }
}
