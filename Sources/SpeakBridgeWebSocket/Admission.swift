#if canImport(Glibc)
import Glibc
#endif

/// Where an unauthenticated connection comes from, for fairness: an IPv4 or IPv6 address. An IPv6 address also
/// counts toward its /64 (`prefix`): one host may hold a whole /64, so single addresses alone would give it 2^64
/// quotas — but every host of a home LAN shares one /64 too, so the /64 gets a larger limit of its own (see
/// ``AdmissionControl``) rather than being one address. An IPv4-mapped IPv6 address counts as its IPv4 address.
package struct AddressKey: Hashable, Sendable, CustomStringConvertible {
    /// 4 bytes (IPv4) or 16 bytes (IPv6).
    package let bytes: [UInt8]

    package init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// From an IP literal (tests and logs); nil when the text is not one.
    package init?(ipLiteral text: String) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.init(ipv4: v4)
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            self.init(ipv6: v6)
        } else {
            return nil
        }
    }

    /// The peer of a connected socket; nil when getpeername fails or the family is neither IPv4 nor IPv6.
    package init?(peerOf fd: Int32) {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        // Why unsafe: getpeername writes a sockaddr of the family it reports into the storage, which is large
        // enough for any family; it is read back only as the type that family names.
        let status = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard status == 0 else { return nil }
        switch Int32(storage.ss_family) {
        case AF_INET:
            let address = withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
            }
            self.init(ipv4: address)
        case AF_INET6:
            let address = withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
            }
            self.init(ipv6: address)
        default:
            return nil
        }
    }

    private init(ipv4 address: in_addr) {
        let value = UInt32(bigEndian: address.s_addr)
        bytes = [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    private init(ipv6 address: in6_addr) {
        let all = withUnsafeBytes(of: address) { Array($0) }
        let mappedPrefix: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]
        if all.count == 16, Array(all.prefix(12)) == mappedPrefix {
            bytes = Array(all.suffix(4))
        } else {
            bytes = all
        }
    }

    /// The IPv6 /64 this address is in (an IPv4 address: itself).
    package var prefix: [UInt8] { bytes.count == 16 ? Array(bytes.prefix(8)) : bytes }

    /// Whom eviction (rule 2 of ``AdmissionControl``) treats as one: the address itself, except that every
    /// loopback address (127.0.0.0/8, and ::1 with the rest of ::/64) is one. Any local user may bind any of the 16
    /// million loopback addresses, so counted one by one they would let one local user hold one connection from
    /// each and, the oldest of equals going first, evict a phone's handshake under way after 64 of them.
    package var evictionGroup: [UInt8] {
        if bytes.count == 4, bytes[0] == 127 { return [127] }
        if bytes.count == 16, bytes.prefix(8).allSatisfy({ $0 == 0 }) { return [127] }  // ::1 (and the rest of ::/64)
        return prefix
    }

    package var description: String {
        if bytes.count == 4 {
            return bytes.map(String.init).joined(separator: ".")
        }
        var groups: [String] = []
        var index = 0
        while index + 1 < bytes.count {
            groups.append(String(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]), radix: 16))
            index += 2
        }
        return groups.joined(separator: ":")
    }
}

/// Who may hold an unauthenticated connection (from TCP accept until the application marks it authenticated),
/// so that strangers cannot lock out a paired device. A pure value; the service loop carries out its decisions.
///
/// The rule:
/// 1. One address (``AddressKey``) holds at most `maxPerAddress` unauthenticated connections; a new one beyond
///    that is refused (the address's older attempts, closer to finishing, are kept). An IPv6 /64 holds at most
///    `maxPerPrefix` (4 × `maxPerAddress`): a new one from an address of a full /64 (under its own limit) evicts
///    the oldest connection of that /64's busiest address, so one host of a LAN cannot lock the others of its /64
///    out (before, the /64 was one address: 8 connections from one host did), nor one host rotating through its
///    /64's addresses hold more than `maxPerPrefix`.
/// 2. All addresses together hold at most `maxTotal`. When a new connection from an address under its own limit
///    arrives and `maxTotal` are held, the oldest unauthenticated connection of the address holding the most
///    (ties: the one whose oldest connection is older) is evicted to make room. So a new address always gets
///    in, and an attacker holding many cannot keep anyone else out; at worst it evicts its own. Here every
///    loopback address counts as one (``AddressKey/evictionGroup``): a local user, who has them all, evicts
///    local connections at worst, never a phone's.
package struct AdmissionControl<ID: Hashable & Sendable>: Sendable {
    package enum Decision: Equatable, Sendable {
        /// Take the connection; first close `evicting` (if any), which this value already forgot.
        case admit(evicting: ID?)
        /// Refuse the connection: its address is at `maxPerAddress`.
        case refuse
    }

    package let maxTotal: Int
    package let maxPerAddress: Int
    package let maxPerPrefix: Int
    private var owners: [ID: (address: AddressKey, sequence: UInt64)] = [:]
    /// Per address, its unauthenticated connections, oldest first.
    private var byAddress: [AddressKey: [ID]] = [:]
    /// Per IPv6 /64 (``AddressKey/prefix``), how many it holds.
    private var byPrefix: [[UInt8]: Int] = [:]
    private var nextSequence: UInt64 = 0

    package init(maxTotal: Int, maxPerAddress: Int) {
        self.maxTotal = max(1, maxTotal)
        self.maxPerAddress = max(1, maxPerAddress)
        self.maxPerPrefix = 4 * self.maxPerAddress
    }

    /// Unauthenticated connections held.
    package var count: Int { owners.count }

    /// Unauthenticated connections held by `address`.
    package func count(from address: AddressKey) -> Int { byAddress[address]?.count ?? 0 }

    /// Whether a new connection from `address` would be refused (rule 1).
    package func refuses(_ address: AddressKey) -> Bool { count(from: address) >= maxPerAddress }

    package func contains(_ id: ID) -> Bool { owners[id] != nil }

    /// Decides on a new connection; when admitted it counts as unauthenticated until ``remove(_:)``.
    package mutating func admit(_ id: ID, from address: AddressKey) -> Decision {
        if owners[id] != nil { return .admit(evicting: nil) }
        if refuses(address) { return .refuse }
        var victim: ID?
        if address.bytes.count == 16, (byPrefix[address.prefix] ?? 0) >= maxPerPrefix,
           let oldest = oldestOfTheBusiestAddress(in: address.prefix) {
            victim = oldest
            remove(oldest)
        } else if owners.count >= maxTotal, let oldest = oldestOfTheGroupHoldingTheMost() {
            victim = oldest
            remove(oldest)
        }
        owners[id] = (address, nextSequence)
        nextSequence &+= 1
        byAddress[address, default: []].append(id)
        if address.bytes.count == 16 { byPrefix[address.prefix, default: 0] += 1 }
        return .admit(evicting: victim)
    }

    /// The connection authenticated or closed: it no longer counts.
    package mutating func remove(_ id: ID) {
        guard let (address, _) = owners.removeValue(forKey: id) else { return }
        byAddress[address]?.removeAll { $0 == id }
        if byAddress[address]?.isEmpty == true {
            byAddress[address] = nil
        }
        if address.bytes.count == 16 {
            let left = (byPrefix[address.prefix] ?? 1) - 1
            byPrefix[address.prefix] = left > 0 ? left : nil
        }
    }

    /// The oldest connection of the address of `prefix` holding the most (ties: the one whose oldest is older).
    private func oldestOfTheBusiestAddress(in prefix: [UInt8]) -> ID? {
        var best: (count: Int, oldest: UInt64, id: ID)?
        for (address, ids) in byAddress where address.bytes.count == 16 && address.prefix == prefix {
            guard let first = ids.first, let sequence = owners[first]?.sequence else { continue }
            if let current = best, ids.count < current.count || (ids.count == current.count && sequence > current.oldest) {
                continue
            }
            best = (ids.count, sequence, first)
        }
        return best?.id
    }

    /// The oldest connection of the eviction group (``AddressKey/evictionGroup``) holding the most; ties: the
    /// group whose oldest connection is older. O(addresses), only when the server is full.
    private func oldestOfTheGroupHoldingTheMost() -> ID? {
        var groups: [[UInt8]: (count: Int, oldest: UInt64, id: ID)] = [:]
        for (address, ids) in byAddress {
            guard let first = ids.first, let sequence = owners[first]?.sequence else { continue }
            let key = address.evictionGroup
            if let known = groups[key] {
                groups[key] = (known.count + ids.count, min(known.oldest, sequence),
                               sequence < known.oldest ? first : known.id)
            } else {
                groups[key] = (ids.count, sequence, first)
            }
        }
        var best: (count: Int, oldest: UInt64, id: ID)?
        for group in groups.values {
            if let current = best,
               group.count < current.count || (group.count == current.count && group.oldest > current.oldest) {
                continue
            }
            best = group
        }
        return best?.id
    }
}
