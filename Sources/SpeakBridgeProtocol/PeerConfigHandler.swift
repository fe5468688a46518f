/// The seam between sessions and the config module: the daemon hands every `config-*` message of an
/// authenticated device to this handler and sends back what it returns. Trust decisions (which keys may
/// travel, what is applied) live behind it; the session layer only guarantees the peer is paired.
///
/// Every requirement may block on files and the keyring (D-Bus): call them off the network thread, one at a time
/// per device, and send the returned messages in order on the connection the request came from.
public protocol PeerConfigHandler: Sendable {
    /// Messages to send to `device` right after its session handshake (e.g. keys staged for it); may be empty.
    func sessionOpened(device: DeviceID, name: String) -> [Message]
    /// Handles one config message (the `.config(type:body:)` envelope, decoded no further); returns the replies.
    func handle(from device: DeviceID, name: String, type: String, body: JSONValue) -> [Message]
    /// `device` was revoked: forget its config exchanges and everything staged for it.
    func deviceRevoked(_ device: DeviceID)
}

extension PeerConfigHandler {
    public func deviceRevoked(_ device: DeviceID) {}
}
