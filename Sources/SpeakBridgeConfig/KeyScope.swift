/// A set of config keys that can also be "every key": the keys a pull asked for (`config-pull` without `keys` asks
/// for all), and so the keys an offer answering it may bring, or the keys `--accept` may apply without review.
public enum KeyScope: Sendable, Equatable {
    case every
    case only(Set<String>)

    /// No key at all.
    public static let nothing = KeyScope.only([])

    /// The keys a pull or a command named; nil names every key.
    public init(_ keys: [String]?) {
        self = keys.map { .only(Set($0)) } ?? .every
    }

    public func contains(_ key: String) -> Bool {
        switch self {
        case .every: return true
        case .only(let keys): return keys.contains(key)
        }
    }

    public func union(_ other: KeyScope) -> KeyScope {
        switch (self, other) {
        case let (.only(a), .only(b)): return .only(a.union(b))
        default: return .every
        }
    }
}
