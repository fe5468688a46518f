import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol

/// The pairing code currently offered, if any. One at a time: a new `pair` replaces the old code.
/// A code is single use (consumed when a handshake's first message decrypts under it), expires after
/// `lifetime` seconds, and dies after `maxFailures` failed handshakes (someone guessing or a stale code).
final class PairingCodes: @unchecked Sendable {
    struct Active {
        /// In self-wiping storage: zeroed once the code is consumed, replaced, expired or dead.
        var secret: SymmetricKey
        var expiry: Date
        var failures: Int
    }

    let lock = NSLock()
    var active: Active?
    let lifetime: TimeInterval
    let maxFailures: Int
    let now: @Sendable () -> Date

    init(lifetime: TimeInterval = TimeInterval(SpeakBridgeProtocol.pairingCodeLifetime),
         maxFailures: Int = SpeakBridgeProtocol.pairingMaxFailures,
         now: @escaping @Sendable () -> Date = { Date() }) {
        self.lifetime = lifetime
        self.maxFailures = maxFailures
        self.now = now
    }

    func issue(publicKey: X25519PublicKey, port: Int, addresses: [PairingAddress]) throws -> PairingCode {
        let secret = SymmetricKey.random()
        let expiry = now().addingTimeInterval(lifetime)
        let code = try PairingCode(publicKey: publicKey.rawRepresentation, secretKey: secret,
                                   expiry: UInt32(expiry.timeIntervalSince1970), port: UInt16(port),
                                   addresses: Array(addresses.prefix(PairingCode.maxAddresses)))
        lock.withLock { active = Active(secret: secret, expiry: expiry, failures: 0) }
        return code
    }

    /// The secret of the live code, or nil (none, expired, or dead).
    func secret() -> SymmetricKey? {
        lock.withLock {
            guard let a = active else { return nil }
            if a.expiry < now() {
                active = nil
                return nil
            }
            return a.secret
        }
    }

    var isActive: Bool { secret() != nil }

    var expiry: Date? { lock.withLock { active?.expiry } }

    func consume() { lock.withLock { active = nil } }

    /// Returns true when this failure killed the code.
    @discardableResult
    func failed() -> Bool {
        lock.withLock {
            guard var a = active else { return false }
            a.failures += 1
            if a.failures >= maxFailures {
                active = nil
                return true
            }
            active = a
            return false
        }
    }
}
