/// Every way a config operation can fail: bad input (local or from a peer), refused trust keys, storage.
///
/// `code` is the wire code sent to a peer in `config-error` (PROTOCOL.md, "Config transfer"); local-only failures
/// use `local`. Messages never contain a value, only key names, so they are safe to log and to send.
public struct ConfigError: Error, CustomStringConvertible, Sendable, Equatable {
    public enum Code: String, Sendable {
        /// A field has the wrong type or shape (bad key, bad version, non-scalar value, duplicate key…).
        case malformed
        /// A `config-*` type this implementation does not know.
        case unknownType = "unknown-type"
        /// A value, a batch or the store would exceed a limit.
        case tooLarge = "too-large"
        /// A trust key (pairings, devices, identity, policy, the config of the config): never transferable.
        case forbidden
        /// A version stamped too far in the future (a wrong clock would win every later merge).
        case clock
        /// The device is not (or no longer) paired.
        case revoked
        /// Failed on this machine (storage, lookup); never sent as a peer's fault.
        case local
    }

    public var code: Code
    public var message: String
    public var hint: String?

    public init(_ code: Code, _ message: String, hint: String? = nil) {
        self.code = code
        self.message = message
        self.hint = hint
    }

    public var description: String { message }

    static func local(_ message: String, hint: String? = nil) -> ConfigError { ConfigError(.local, message, hint: hint) }
}
