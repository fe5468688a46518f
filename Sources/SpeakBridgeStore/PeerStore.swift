import FoundationEssentials
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeSupport

/// A paired device. On the desktop these are capture clients; on a client, desktops.
/// Not Equatable on purpose: comparing peers would compare their psks; compare `id` instead.
public struct Peer: Sendable {
    public enum Role: String, Sendable { case client, desktop }
    /// `native` or `browser` (DeviceKind, in SpeakBridgeProtocol, which the desktop core uses too).
    public typealias Kind = DeviceKind

    public var name: String
    public var publicKey: X25519PublicKey
    /// The per-pair psk, in self-wiping storage (secret; the file is 0600).
    public var psk: SymmetricKey
    public var role: Role
    public var pairedAt: Date
    public var lastSeen: Date?
    /// Desktops only: addresses that worked, most recent first, and the port.
    public var addresses: [String]
    public var port: Int
    public var kind: Kind
    /// Browser devices: the user agent in short ("Chrome 156 on Android"), for `devices`.
    public var agent: String?

    public var id: DeviceID { KeySchedule.deviceID(of: publicKey) }

    public init(name: String, publicKey: X25519PublicKey, psk: SymmetricKey, role: Role, pairedAt: Date = Date(),
                lastSeen: Date? = nil, addresses: [String] = [], port: Int = 0, kind: Kind = .native,
                agent: String? = nil) {
        self.kind = kind
        self.agent = agent
        self.name = name
        self.publicKey = publicKey
        self.psk = psk
        self.role = role
        self.pairedAt = pairedAt
        self.lastSeen = lastSeen
        self.addresses = addresses
        self.port = port
    }
}

/// The list of paired devices, in `state/peers.json` (0600), replaced atomically on every change.
/// Thread-safe; every mutation is durable before it returns, and only then seen by readers. Readers never wait
/// for a write's disk work (`lock` guards the list alone; `writer` orders the mutations): the daemon's service
/// thread asks `wouldRecord` at every handshake, and a peers.json write on another thread (two fsyncs; seconds on a
/// stalled disk) would otherwise have held every connection's delivery behind it.
///
/// The file holds every psk: it is read only if it passes `PrivatePath.checkFile` (ours, 0600, not a symlink), so
/// another user cannot plant a `peers.json` that pairs their device. The psks go between the file and
/// `SymmetricKey` storage as hex without plain copies where it can be helped: written digit by digit into the
/// output buffer, which is wiped after the write, and parsed straight into secure storage. (The parsed JSON
/// string of each psk is the one copy left to the allocator.)
public final class PeerStore: @unchecked Sendable {
    let path: String
    /// Guards `peers`; held only to read it or to put a written list in place.
    let lock = ThreadLock()
    /// Held by a mutation from reading the list to putting the written one in place (file work included), so
    /// that mutations apply one after another.
    let writer = ThreadLock()
    var peers: [Peer]

    public init(home: Home) throws(StoreError) {
        try home.prepare()
        path = home.peersFile
        peers = try Self.load(path)
    }

    public var all: [Peer] { lock.withLock { peers } }

    public func peer(key: X25519PublicKey) -> Peer? { lock.withLock { peers.first { $0.publicKey == key } } }

    /// Finds a peer by device ID (any case, dashes optional), an unambiguous ID prefix, or exact name.
    /// nil when nothing matches or the query is ambiguous (`matches` tells which).
    public func find(_ query: String) -> Peer? {
        let found = matches(query)
        return found.count == 1 ? found[0] : nil
    }

    /// Every peer `query` could mean, best rule first: the full device ID (one peer); else every peer whose ID
    /// starts with it, when exactly one does (and no other peer has that name: then both, ambiguous); else every
    /// peer with exactly that name (several devices may share one); else every peer whose ID starts with it (an
    /// ambiguous prefix). Empty when nothing matches.
    public func matches(_ query: String) -> [Peer] {
        let all = self.all
        if let id = try? DeviceID(parsing: query), let p = all.first(where: { $0.id == id }) { return [p] }
        let compact = query.uppercased().replacing("-", with: "")
        let byPrefix = all.filter { !compact.isEmpty && $0.id.compact.hasPrefix(compact) }
        let byName = all.filter { $0.name == query }
        if byPrefix.count == 1 {
            // A name that is also the start of another device's ID ("vm", and an ID starting VM…) names two
            // devices: both are returned (ambiguous), never the other one alone.
            return byName.contains { $0.id != byPrefix[0].id } ? byName + byPrefix.filter { p in !byName.contains { $0.id == p.id } }
                                                                : byPrefix
        }
        return byName.isEmpty ? byPrefix : byName
    }

    /// Adds or replaces (same key) a peer.
    public func upsert(_ peer: Peer) throws(StoreError) {
        try mutate { peers in
            peers.removeAll { $0.publicKey == peer.publicKey }
            peers.append(peer)
        }
    }

    /// Records that the peer `key` was just reached, and on a client where: `address` goes first in its addresses
    /// (at most `keep` are kept; the oldest are forgotten). peers.json is rewritten (two fsyncs) only when the
    /// addresses or the port change or the stored time is `resolution` old or more: "last seen" is shown to the
    /// minute, and neither a script that runs `send --text` many times a minute nor a desktop with a hundred
    /// devices reconnecting should pay a durable write per connection for it. Returns whether it wrote.
    @discardableResult
    public func seen(key: X25519PublicKey, now: Date = Date(), address: (host: String, port: Int)? = nil,
                     keep: Int = Int.max, resolution: TimeInterval = 60) throws(StoreError) -> Bool {
        if isFresh(key: key, now: now, address: address, keep: keep, resolution: resolution) { return false }
        try update(key: key) { Self.change(&$0, now: now, address: address, keep: keep) }
        return true
    }

    /// Whether `seen` with the same arguments would rewrite peers.json (false: it would return at once). `send`
    /// asks this on its queue and hands `seen` to another thread only when it would write.
    public func wouldRecord(key: X25519PublicKey, now: Date = Date(), address: (host: String, port: Int)? = nil,
                            keep: Int = Int.max, resolution: TimeInterval = 60) -> Bool {
        !isFresh(key: key, now: now, address: address, keep: keep, resolution: resolution)
    }

    static func change(_ peer: inout Peer, now: Date, address: (host: String, port: Int)?, keep: Int) {
        if let address {
            peer.addresses = Array(([address.host] + peer.addresses.filter { $0 != address.host }).prefix(keep))
            peer.port = address.port
        }
        peer.lastSeen = now
    }

    /// `seen`'s test: the peer is known, was seen less than `resolution` ago, and the change keeps its addresses.
    func isFresh(key: X25519PublicKey, now: Date, address: (host: String, port: Int)?, keep: Int,
                 resolution: TimeInterval) -> Bool {
        lock.withLock {
            guard let current = peers.first(where: { $0.publicKey == key }), let last = current.lastSeen else {
                return false
            }
            var next = current
            Self.change(&next, now: now, address: address, keep: keep)
            let age = now.timeIntervalSince(last)
            return next.addresses == current.addresses && next.port == current.port && age >= 0 && age < resolution
        }
    }

    @discardableResult
    public func remove(id: DeviceID) throws(StoreError) -> Peer? {
        var removed: Peer?
        try mutate { peers in
            removed = peers.first { $0.id == id }
            peers.removeAll { $0.id == id }
        }
        return removed
    }

    public func update(key: X25519PublicKey, _ change: (inout Peer) -> Void) throws(StoreError) {
        try mutate { peers in
            if let i = peers.firstIndex(where: { $0.publicKey == key }) { change(&peers[i]) }
        }
    }

    func mutate(_ change: (inout [Peer]) -> Void) throws(StoreError) {
        writer.lock()
        defer { writer.unlock() }
        var copy = lock.withLock { peers }
        change(&copy)
        var bytes = Self.encode(copy)
        defer { SecretMemory.wipe(&bytes) }
        try FileIO.atomicWrite(path, bytes)
        lock.withLock { peers = copy }
    }

    // MARK: file format

    /// Seconds since 1970 in the file: 0 … 2^40 (year 36,812). A time read from an edited or damaged file is
    /// held to it, so that writing it back can never trap (`Int64(2^63 as Double)` did, at every `seen`).
    static let maxEpochSeconds: Int64 = 1 << 40

    static func epochSeconds(_ date: Date) -> Int64 {
        let t = date.timeIntervalSince1970
        guard t.isFinite else { return 0 }
        return Int64(min(max(t, 0), Double(maxEpochSeconds)))
    }

    static func date(epochSeconds value: Int64) -> Date {
        Date(timeIntervalSince1970: Double(min(max(value, 0), maxEpochSeconds)))
    }

    /// `{"version":1,"peers":[{…,"psk":"<64 hex>"},…]}` and a newline. The caller must wipe the result.
    static func encode(_ peers: [Peer]) -> [UInt8] {
        let items: [[UInt8]] = peers.map { p in
            var m: [(String, JSONValue)] = [
                ("id", .string(p.id.description)),
                ("name", .string(p.name)),
                ("role", .string(p.role.rawValue)),
                ("publicKey", .string(Hex.encode(p.publicKey.rawRepresentation))),
                ("pairedAt", .integer(epochSeconds(p.pairedAt))),
            ]
            if let seen = p.lastSeen { m.append(("lastSeen", .integer(epochSeconds(seen)))) }
            if !p.addresses.isEmpty { m.append(("addresses", .array(p.addresses.map { .string($0) }))) }
            if p.port != 0 { m.append(("port", .integer(Int64(p.port)))) }
            if p.kind != .native { m.append(("kind", .string(p.kind.rawValue))) }
            if let agent = p.agent { m.append(("agent", .string(agent))) }
            return JSONValue.object(m).encoded()
        }
        let head = Array(#"{"version":1,"peers":["#.utf8), pskKey = Array(#","psk":""#.utf8)
        // Exact size, reserved up front: no reallocation leaves a copy of a psk behind in freed memory.
        let pskSize = pskKey.count + SymmetricKey.byteCount * 2 + 1
        var out: [UInt8] = []
        out.reserveCapacity(head.count + items.reduce(0) { $0 + $1.count + pskSize + 1 } + 3)
        out += head
        for (i, (peer, item)) in zip(peers, items).enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out += item.dropLast()  // the object's closing brace: the psk member goes last
            out += pskKey
            peer.psk.appendHex(to: &out)
            out += Array(#""}"#.utf8)
        }
        out += Array("]}\n".utf8)
        return out
    }

    static func load(_ path: String) throws(StoreError) -> [Peer] {
        guard var bytes = try FileIO.read(path, leaked: "revoke every device (`speakbridge devices revoke`) and pair again")
        else { return [] }
        defer { SecretMemory.wipe(&bytes) }
        let bad = StoreError("\(path) is damaged", hint: "restore it from a backup, or move it away and pair again")
        guard let doc = try? JSONValue.parse(bytes, maxDepth: 6, maxBytes: 16 << 20),
              let items = doc["peers"]?.arrayValue else { throw bad }
        var peers: [Peer] = []
        for item in items {
            guard let name = item["name"]?.stringValue,
                  let role = item["role"]?.stringValue.flatMap(Peer.Role.init(rawValue:)),
                  let keyBytes = item["publicKey"]?.stringValue.flatMap(Hex.decode),
                  let key = try? X25519PublicKey(rawRepresentation: keyBytes),
                  let psk = item["psk"]?.stringValue.flatMap(SymmetricKey.init(hex:)),
                  let paired = item["pairedAt"]?.int64Value,
                  // Absent (files written before kinds existed): native. An unknown kind is refused, not guessed.
                  let kind = item["kind"].map({ $0.stringValue.flatMap(Peer.Kind.init(rawValue:)) }) ?? .native
            else { throw bad }
            peers.append(Peer(
                name: name, publicKey: key, psk: psk, role: role,
                pairedAt: Self.date(epochSeconds: paired),
                lastSeen: item["lastSeen"]?.int64Value.map { Self.date(epochSeconds: $0) },
                addresses: item["addresses"]?.arrayValue?.compactMap(\.stringValue) ?? [],
                port: Int(item["port"]?.int64Value ?? 0), kind: kind, agent: item["agent"]?.stringValue))
        }
        return peers
    }
}
