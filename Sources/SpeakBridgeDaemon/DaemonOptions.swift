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
    /// The desktop's name, announced over mDNS and sent in `pair-accept`; nil = "SpeakBridge <short ID>" (no user or
    /// host name unless asked). 1 to `SpeakBridgeProtocol.maxDesktopNameBytes` bytes of UTF-8 (`nameProblem`):
    /// `Daemon.init` refuses any other.
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

    /// Why `name` cannot be the desktop's name, or nil when it can: it must be 1 to 63 bytes of UTF-8, the limit of
    /// an mDNS instance name (a DNS label), which is also within `pair-accept`'s 64 (a longer name there makes every
    /// client refuse message 2, so every pairing would fail).
    public static func nameProblem(_ name: String) -> String? {
        let bytes = name.utf8.count
        if bytes == 0 { return "the desktop's name must not be empty" }
        let limit = SpeakBridgeProtocol.maxDesktopNameBytes
        if bytes > limit {
            return "the desktop's name is \(bytes) bytes of UTF-8; at most \(limit) fit (it is the mDNS instance name "
                + "and the name paired devices are sent)"
        }
        return nil
    }
}

/// `DaemonOptions.name` is not a valid desktop name (`DaemonOptions.nameProblem`).
public struct DaemonNameError: Error, CustomStringConvertible {
    public let description: String
}
