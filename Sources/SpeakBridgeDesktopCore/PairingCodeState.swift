import SpeakBridgeCrypto
import SpeakBridgeProtocol

/// The pairing code currently offered, if any, as a value with a manual clock (seconds since 1970).
/// One at a time: a new code replaces the old one. A code is single use (consumed when a handshake's first
/// message decrypts under it), is live while `now < expiry` (the expiry the code carries, whole seconds), and dies after `maxFailures` failed handshakes (someone
/// guessing, or a stale code). Its secret is in self-wiping storage, dropped the moment the code is consumed,
/// replaced, expired or dead.
///
/// A code remembers the kind of device it was issued for: a `browser` code (`pair --web`) is offered to
/// connections of the browser route only. On the native route it does not exist: no secret to run message 1
/// under, so a native `join` with it fails as with no code at all (nothing saved, no failed attempt counted: a
/// native peer cannot kill it either). Otherwise a `pair --web` code, read off the screen, could pair a native
/// device, which may pull and push config (SECURITY.md §7). A native code (`pair`) works on both routes; a pairing
/// on the browser route is saved as a browser device whatever code it used.
public struct PairingCodeState: Sendable {
    struct Active: Sendable {
        var secret: SymmetricKey
        var expiry: Double
        var failures: Int
        var kind: DeviceKind
    }

    var active: Active?
    public let maxFailures: Int

    public init(maxFailures: Int = SpeakBridgeProtocol.pairingMaxFailures) {
        self.maxFailures = max(1, maxFailures)
    }

    /// Offers `secret` until `expiry` (replacing any code offered before) to connections of the routes `kind` may
    /// use (`browser`: the browser route only).
    public mutating func issue(secret: SymmetricKey, expiry: Double, kind: DeviceKind = .native) {
        active = Active(secret: secret, expiry: expiry, failures: 0, kind: kind)
    }

    /// Drops an expired code; the secret of the live one, or nil.
    public mutating func secret(at now: Double) -> SymmetricKey? {
        expire(at: now)
        return active?.secret
    }

    /// The live code's secret for a connection of the `route` kind: nil when there is none or it is a browser code
    /// and the connection is native.
    public func secret(for route: DeviceKind) -> SymmetricKey? {
        guard let a = active, Self.admits(a.kind, route) else { return nil }
        return a.secret
    }

    /// A code is live (any route): `now < expiry`, as PROTOCOL.md states the rule.
    public func isActive(at now: Double) -> Bool {
        guard let a = active else { return false }
        return now < a.expiry
    }

    /// A code is live that a connection of the `route` kind may pair with.
    public func isActive(at now: Double, for route: DeviceKind) -> Bool {
        guard let a = active else { return false }
        return now < a.expiry && Self.admits(a.kind, route)
    }

    /// The kind of the live code, nil when none.
    public var kind: DeviceKind? { active?.kind }

    /// A browser code on the browser route only; a native code anywhere.
    static func admits(_ code: DeviceKind, _ route: DeviceKind) -> Bool {
        code == .native || route == .browser
    }

    public mutating func expire(at now: Double) {
        if let a = active, now >= a.expiry { active = nil }
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
