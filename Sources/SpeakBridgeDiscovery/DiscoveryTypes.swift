// Public values of SpeakBridgeDiscovery. No avahi types appear in this module's public API.
import SpeakBridgeSupport

/// Fixed DNS-SD names of SpeakBridge.
public enum MDNSConstants {
    /// The DNS-SD service type a SpeakBridge daemon publishes and clients browse for.
    public static let serviceType = "_speakbridge._tcp"
}

/// Where an ``MDNSPublisher`` stands. Reported on every change through its `onStateChange`.
public enum PublisherState: Sendable, Equatable, CustomStringConvertible {
    /// Created; nothing heard from avahi yet.
    case starting
    /// avahi-daemon (or the D-Bus system bus it is reached through) is not available. The publisher
    /// keeps retrying and publishes as soon as the daemon appears. The text says what is missing.
    case noDaemon(String)
    /// Connected to avahi-daemon; the service is being probed and announced (takes about a second).
    case registering
    /// The service is on the network under `name`, which differs from the requested name after a
    /// collision with another service ("Desk" becomes "Desk #2").
    case established(name: String)
    /// The service cannot be published as given (invalid name or TXT data, or avahi refused it).
    /// Avahi refusals are retried; invalid input is not.
    case failed(String)

    public var description: String {
        switch self {
        case .starting: "starting"
        case .noDaemon(let why): "no avahi-daemon: \(why)"
        case .registering: "registering"
        case .established(let name): "published as \"\(name)\""
        case .failed(let why): "failed: \(why)"
        }
    }
}

/// One SpeakBridge service found on the network, merged over every interface and IP protocol
/// it was resolved on.
public struct DiscoveredService: Sendable, Hashable {
    /// The DNS-SD instance name, e.g. "Desk" or "Desk #2".
    public var name: String
    /// The publishing host's mDNS name, e.g. "desk.local".
    public var hostName: String
    /// Every address the service currently resolves to, without duplicates: IPv4 first, then IPv6,
    /// IPv6 link-local addresses last. A link-local IPv6 address carries its zone (`fe80::1%eth0`),
    /// because without the interface it cannot be connected to; getaddrinfo understands that form.
    public var addresses: [String]
    /// The TCP port of the WebSocket endpoint.
    public var port: Int
    /// The TXT record: keys lowercased (DNS-SD keys are case-insensitive), a key without `=` maps
    /// to "", and when a key repeats the first occurrence counts (RFC 6763 §6.4).
    public var txt: [String: String]
    /// True if the service was published by this host (for instance by the local daemon).
    public var isLocal: Bool

    public init(name: String, hostName: String, addresses: [String], port: Int, txt: [String: String], isLocal: Bool) {
        self.name = name
        self.hostName = hostName
        self.addresses = addresses
        self.port = port
        self.txt = txt
        self.isLocal = isLocal
    }
}

/// Errors of SpeakBridgeDiscovery.
public enum DiscoveryError: Error, Equatable, CustomStringConvertible {
    /// avahi-daemon cannot be reached (no D-Bus system bus, or the daemon is not running).
    case noDaemon(String)
    /// A TXT entry cannot be encoded: empty key, a key with `=` or non-printable characters,
    /// a repeated key, or an entry longer than 255 bytes.
    case invalidTXT(String)
    /// avahi refused a request; the text is avahi's own message.
    case avahi(String)
    /// libavahi-client cannot be loaded (it is opened on first use, not linked): not installed, or too old.
    case libraryMissing(SharedLibraryError)

    public var description: String {
        switch self {
        case .noDaemon(let why):
            "mDNS is unavailable: \(why)"
        case .invalidTXT(let why):
            "invalid TXT record: \(why)"
        case .avahi(let why):
            "avahi error: \(why)"
        case .libraryMissing(let error):
            "mDNS is unavailable: \(error.description)"
        }
    }

    /// What the user can do about it, one line, for a `hint:` message.
    public var hint: String {
        switch self {
        case .noDaemon:
            "start avahi-daemon (sudo systemctl start avahi-daemon; Debian/Ubuntu package avahi-daemon); "
                + "until then peers are reached through their last known addresses and the pairing code"
        case .invalidTXT:
            "TXT keys are short printable ASCII without '=', each key=value at most 255 bytes"
        case .avahi:
            "check avahi-daemon's log (journalctl -u avahi-daemon)"
        case .libraryMissing(let error):
            error.hint
        }
    }
}
