import Dispatch
import FoundationEssentials
import SpeakBridgeDiscovery
import SpeakBridgeProtocol
import SpeakBridgeSupport

/// Finds a desktop by its key over mDNS: browses `_speakbridge._tcp` and reports the addresses of services
/// whose TXT `id` is the desktop's device ID. Discovery data is only a hint: the Noise handshake decides.
/// Without avahi-daemon it does nothing (clients then use remembered addresses and the code's).
final class DesktopFinder: @unchecked Sendable {
    let browser: MDNSBrowser?

    init(desktop: DeviceID, queue: LockedQueue, onFound: @escaping @Sendable ([Candidate]) -> Void) {
        browser = try? MDNSBrowser { services in
            // Only services that speak our protocol version and carry the paired desktop's ID.
            let matches = services.filter { s in
                s.txt["v"] == String(SpeakBridgeProtocol.version)
                    && (s.txt["id"]).flatMap { try? DeviceID(parsing: $0) } == desktop
            }
            let candidates = matches.flatMap { s in s.addresses.map { Candidate(host: $0, port: s.port, source: "mDNS") } }
            guard !candidates.isEmpty else { return }
            queue.async { onFound(candidates) }
        }
    }

    var isBrowsing: Bool { browser != nil }

    func stop() { browser?.stop() }
}
