// The browser's bookkeeping, pure Swift: one resolve result per (interface, protocol, service),
// merged into one DiscoveredService per service name.
//
// avahi reports a service once per interface and IP protocol it is seen on, and keeps a resolver
// per report that fires again whenever the service's data (address, port, TXT) changes. The table
// stores the latest result of each and merges them on demand.

/// Identifies one avahi browse/resolve report.
struct ResolveKey: Hashable, Sendable {
    var interface: Int32
    /// 4 or 6: the IP protocol the report came over.
    var ipVersion: Int
    var name: String
    var type: String
    var domain: String
}

/// The latest result of one resolver.
struct Resolution: Equatable, Sendable {
    var hostName: String
    /// Already formatted for use (see ``ResolvedAddress``); nil if unusable (scope unknown).
    var address: String?
    var port: Int
    var txt: [String: String]
    var isLocal: Bool
}

struct ServiceTable {
    private(set) var entries: [ResolveKey: Resolution] = [:]

    /// Stores a resolve result; returns true if the table changed.
    @discardableResult
    mutating func update(_ key: ResolveKey, _ resolution: Resolution) -> Bool {
        guard entries[key] != resolution else { return false }
        entries[key] = resolution
        return true
    }

    /// Forgets one report (the service left that interface, or its resolver failed).
    @discardableResult
    mutating func remove(_ key: ResolveKey) -> Bool {
        entries.removeValue(forKey: key) != nil
    }

    mutating func removeAll() {
        entries.removeAll()
    }

    /// One service per (name, type, domain), sorted by name. Host name, port and TXT come from the
    /// report with the lowest (interface, protocol); addresses are the union of all reports.
    var services: [DiscoveredService] {
        struct Identity: Hashable { var name: String; var type: String; var domain: String }
        let groups = Dictionary(grouping: entries) { Identity(name: $0.key.name, type: $0.key.type, domain: $0.key.domain) }
        var merged: [DiscoveredService] = []
        for (identity, reports) in groups {
            let ordered = reports.sorted { ($0.key.interface, $0.key.ipVersion) < ($1.key.interface, $1.key.ipVersion) }
            guard let first = ordered.first?.value else { continue }
            var addresses = Set<String>()
            for report in ordered {
                if let address = report.value.address { addresses.insert(address) }
            }
            merged.append(DiscoveredService(
                name: identity.name,
                hostName: first.hostName,
                addresses: ResolvedAddress.sorted(addresses),
                port: first.port,
                txt: first.txt,
                isLocal: ordered.contains { $0.value.isLocal }))
        }
        return merged.sorted { ($0.name, $0.hostName) < ($1.name, $1.hostName) }
    }
}

/// Address text as DiscoveredService carries it.
enum ResolvedAddress {
    /// `text` as printed by avahi ("169.254.1.2", "fe80::1"). A link-local IPv6 address gets its
    /// zone appended ("fe80::1%eth0"); without a known interface name it is dropped (nil),
    /// since it could not be connected to.
    static func format(_ text: String, isIPv6LinkLocal: Bool, interfaceName: String?) -> String? {
        guard isIPv6LinkLocal else { return text }
        guard let interfaceName, !interfaceName.isEmpty else { return nil }
        return "\(text)%\(interfaceName)"
    }

    /// IPv4 first (numerically), then IPv6, link-local IPv6 (with a zone) last.
    static func sorted(_ addresses: Set<String>) -> [String] {
        func rank(_ a: String) -> Int {
            if !a.contains(":") { return 0 }
            return a.contains("%") ? 2 : 1
        }
        func ipv4Value(_ a: String) -> UInt32? {
            let parts = a.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 4 else { return nil }
            var value: UInt32 = 0
            for part in parts {
                guard let octet = UInt8(part) else { return nil }
                value = value << 8 | UInt32(octet)
            }
            return value
        }
        return addresses.sorted { lhs, rhs in
            let (l, r) = (rank(lhs), rank(rhs))
            if l != r { return l < r }
            if l == 0, let lv = ipv4Value(lhs), let rv = ipv4Value(rhs), lv != rv { return lv < rv }
            return lhs < rhs
        }
    }
}
