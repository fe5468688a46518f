import Dispatch
import FoundationEssentials
import SpeakBridgeDiscovery
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

/// Publishes this desktop over mDNS and keeps `status` informed. Says once per outage, clearly, when Avahi is
/// absent (the publisher keeps retrying; the daemon keeps working by address).
final class DiscoveryService: Sendable {
    let publisher: MDNSPublisher
    /// Signalled once the first outcome (published, no daemon, failed) has been logged.
    let firstOutcome = DispatchSemaphore(value: 0)

    init(name: String, port: Int, deviceID: DeviceID) {
        let warnedBox = WarnOnce()
        let outcomeOnce = WarnOnce()
        let firstOutcome = firstOutcome
        publisher = MDNSPublisher(name: name, port: port,
                                  txt: ["v": String(SpeakBridgeProtocol.version), "id": deviceID.description]) { state in
            switch state {
            case .noDaemon(let reason):
                if warnedBox.first() {
                    Console.warning("mDNS publishing is off: \(reason); clients can still reach this desktop by address")
                }
            case .established(let published):
                warnedBox.reset()
                if published == name {
                    Console.info("published over mDNS as \"\(published)\"")
                } else {
                    Console.info("published over mDNS as \"\(published)\": another service on the LAN already uses \"\(name)\"")
                }
            case .failed(let reason):
                Console.warning("mDNS publishing failed: \(reason)")
            default:
                return
            }
            if outcomeOnce.first() { firstOutcome.signal() }
        }
    }

    /// Waits until the first outcome is logged, at most `timeout` seconds.
    func waitForFirstOutcome(timeout: TimeInterval) {
        if firstOutcome.wait(timeout: .now() + timeout) == .success { firstOutcome.signal() }
    }

    var isActive: Bool {
        if case .established = publisher.state { return true }
        return false
    }

    /// The name the service is published under (avahi's, after any collision renaming), or nil.
    var publishedName: String? {
        if case .established(let name) = publisher.state { return name }
        return nil
    }

    var stateDescription: String {
        switch publisher.state {
        case .starting: return "starting"
        case .noDaemon(let reason): return "inactive: \(reason)"
        case .registering: return "registering"
        case .established(let name): return "published as \"\(name)\""
        case .failed(let reason): return "failed: \(reason)"
        }
    }

    func stop() { publisher.stop() }
}

extension Daemon {
    /// Returns once the mDNS publication's first outcome has been logged (or at once without mDNS), at most
    /// after `timeout` seconds: `serve` shows the pairing QR after that line, not under it.
    public func waitForDiscoveryOutcome(timeout: TimeInterval) {
        discovery?.waitForFirstOutcome(timeout: timeout)
    }
}

// `@unchecked Sendable` is sound: `done` is read and written only under `lock`.
final class WarnOnce: @unchecked Sendable {
    let lock = ThreadLock()
    var done = false
    func first() -> Bool { lock.withLock { defer { done = true }; return !done } }
    func reset() { lock.withLock { done = false } }
}
