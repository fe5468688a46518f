/// The seam between sessions and the config module: the daemon hands every `config-*` message of an
/// authenticated device to this handler and sends back what it returns. Trust decisions (which keys may
/// travel, what is applied) live behind it; the session layer only guarantees the peer is paired.
public protocol PeerConfigHandler: Sendable {
    /// Messages to send to `device` right after its session handshake (e.g. keys staged for it); may be empty.
    func sessionOpened(device: DeviceID, name: String) -> [Message]
    /// Handles one config message; returns the replies.
    func handle(from device: DeviceID, name: String, type: String, body: JSONValue) -> [Message]
}
