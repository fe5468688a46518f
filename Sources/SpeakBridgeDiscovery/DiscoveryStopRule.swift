/// When `discover` may stop listening before its timeout: once every desktop it already knows of (its paired
/// desktops, by device ID) has answered. With none known it listens for the whole timeout: it is then looking
/// for desktops it does not know yet, and cannot tell when the last one has answered.
public enum DiscoveryStopRule {
    /// Whether every ID in `known` is among the `id`s of the resolved `services` (`id` reads a service's TXT
    /// `id` in canonical form, nil if it has none or a malformed one).
    public static func everyKnownAnswered(_ services: [DiscoveredService], known: Set<String>,
                                          id: (DiscoveredService) -> String?) -> Bool {
        guard !known.isEmpty else { return false }
        var missing = known
        for service in services where !service.addresses.isEmpty {
            if let answered = id(service) { missing.remove(answered) }
            if missing.isEmpty { return true }
        }
        return false
    }
}
