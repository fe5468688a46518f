import SpeakBridgeCrypto
import SpeakBridgeProtocol

/// The pairing code currently offered, if any, as a value with a manual clock (seconds since 1970).
/// One at a time: a new code replaces the old one. A code is single use (consumed when a handshake's first
/// message decrypts under it), expires at its expiry, and dies after `maxFailures` failed handshakes (someone
/// guessing, or a stale code). Its secret is in self-wiping storage, dropped the moment the code is consumed,
/// replaced, expired or dead.
public struct PairingCodeState: Sendable {
    struct Active: Sendable {
        var secret: SymmetricKey
        var expiry: Double
        var failures: Int
    }

    var active: Active?
    public let maxFailures: Int

    public init(maxFailures: Int = SpeakBridgeProtocol.pairingMaxFailures) {
        self.maxFailures = max(1, maxFailures)
    }

    /// Offers `secret` until `expiry` (replacing any code offered before).
    public mutating func issue(secret: SymmetricKey, expiry: Double) {
        active = Active(secret: secret, expiry: expiry, failures: 0)
    }

    /// Drops an expired code; the secret of the live one, or nil.
    public mutating func secret(at now: Double) -> SymmetricKey? {
        expire(at: now)
        return active?.secret
    }

    public func isActive(at now: Double) -> Bool {
        guard let a = active else { return false }
        return now <= a.expiry
    }

    public mutating func expire(at now: Double) {
        if let a = active, now > a.expiry { active = nil }
    }

    public mutating func consume() { active = nil }

    /// One failed handshake under the code. True when this failure killed it.
    public mutating func failed() -> Bool {
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
