import SpeakBridgeProtocol
import Synchronization

/// Which accepted chunks belong to a device revoked since they were accepted, as a value (the pipeline keeps one
/// under its lock, the progress log another under its own).
///
/// Every message the pipeline accepts is stamped with `count`, the number of revocations so far
/// (`SinkItem.generation`). Revoking a device raises the count and remembers it for the device: an item of that
/// device stamped below it was accepted before the revocation and is stale — not written by any sink, not
/// recorded, not counted in the levels or the backlog. A device paired again with the same key gets items stamped
/// at or above it, which flow as usual.
///
/// Bounded by the number of devices ever revoked (one entry each; a revocation is a user's command on the
/// desktop).
struct Revocations: Sendable {
    private(set) var count: UInt64 = 0
    private var since: [DeviceID: UInt64] = [:]

    /// Revokes `device`; returns the new count (the generation its later items get).
    mutating func revoke(_ device: DeviceID) -> UInt64 {
        count &+= 1
        since[device] = count
        return count
    }

    /// Marks `device` revoked at `generation` (a count another `Revocations` returned); a later mark wins.
    mutating func adopt(_ device: DeviceID, at generation: UInt64) {
        guard generation > (since[device] ?? 0) else { return }
        since[device] = generation
        count = max(count, generation)
    }

    func generation(_ device: DeviceID) -> UInt64? { since[device] }

    /// One comparison for an item accepted since the last revocation (every item, but in the moment of one).
    func isStale(_ device: DeviceID, generation: UInt64) -> Bool {
        guard generation < count, let revoked = since[device] else { return false }
        return generation < revoked
    }
}

/// `Revocations.count` as the pipeline last published it, for lock-free checks on the sinks' threads (a class, so
/// that each runner holds it strongly).
final class RevocationCounter: Sendable {
    let count = Atomic<UInt64>(0)
}
