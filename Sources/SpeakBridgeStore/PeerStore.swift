import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol

/// A paired device. On the desktop these are capture clients; on a client, desktops.
public struct Peer: Sendable, Equatable {
    public enum Role: String, Sendable { case client, desktop }

    public var name: String
    public var publicKey: X25519PublicKey
    /// The per-pair psk (secret; the file is 0600).
    public var psk: [UInt8]
    public var role: Role
    public var pairedAt: Date
    public var lastSeen: Date?
    /// Desktops only: addresses that worked, most recent first, and the port.
    public var addresses: [String]
    public var port: Int

    public var id: DeviceID { KeySchedule.deviceID(of: publicKey) }

    public init(name: String, publicKey: X25519PublicKey, psk: [UInt8], role: Role, pairedAt: Date = Date(),
                lastSeen: Date? = nil, addresses: [String] = [], port: Int = 0) {
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
/// Thread-safe; every mutation is durable before it returns.
public final class PeerStore: @unchecked Sendable {
    let path: String
    let lock = NSLock()
    var peers: [Peer]

    public init(home: Home) throws(StoreError) {
        try home.prepare()
        path = home.peersFile
        peers = try Self.load(path)
    }

    public var all: [Peer] { lock.withLock { peers } }

    public func peer(key: X25519PublicKey) -> Peer? { lock.withLock { peers.first { $0.publicKey == key } } }

    /// Finds a peer by device ID (any case, dashes optional), an unambiguous ID prefix, or exact name.
    public func find(_ query: String) -> Peer? {
        let all = self.all
        if let id = try? DeviceID(parsing: query), let p = all.first(where: { $0.id == id }) { return p }
        let compact = query.uppercased().replacingOccurrences(of: "-", with: "")
        let byPrefix = all.filter { !compact.isEmpty && $0.id.compact.hasPrefix(compact) }
        if byPrefix.count == 1 { return byPrefix[0] }
        let byName = all.filter { $0.name == query }
        return byName.count == 1 ? byName[0] : nil
    }

    /// Adds or replaces (same key) a peer.
    public func upsert(_ peer: Peer) throws(StoreError) {
        try mutate { peers in
            peers.removeAll { $0.publicKey == peer.publicKey }
            peers.append(peer)
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
        lock.lock()
        defer { lock.unlock() }
        var copy = peers
        change(&copy)
        try FileIO.atomicWrite(path, Self.encode(copy))
        peers = copy
    }

    // MARK: file format

    static func encode(_ peers: [Peer]) -> [UInt8] {
        let items: [JSONValue] = peers.map { p in
            var m: [(String, JSONValue)] = [
                ("id", .string(p.id.description)),
                ("name", .string(p.name)),
                ("role", .string(p.role.rawValue)),
                ("publicKey", .string(Hex.encode(p.publicKey.rawRepresentation))),
                ("psk", .string(Hex.encode(p.psk))),
                ("pairedAt", .integer(Int64(p.pairedAt.timeIntervalSince1970))),
            ]
            if let seen = p.lastSeen { m.append(("lastSeen", .integer(Int64(seen.timeIntervalSince1970)))) }
            if !p.addresses.isEmpty { m.append(("addresses", .array(p.addresses.map { .string($0) }))) }
            if p.port != 0 { m.append(("port", .integer(Int64(p.port)))) }
            return .object(m)
        }
        return JSONValue.object([("version", .integer(1)), ("peers", .array(items))]).encoded() + [0x0A]
    }

    static func load(_ path: String) throws(StoreError) -> [Peer] {
        guard let bytes = try FileIO.read(path) else { return [] }
        let bad = StoreError("\(path) is damaged", hint: "restore it from a backup, or move it away and pair again")
        guard let doc = try? JSONValue.parse(bytes, maxDepth: 6, maxBytes: 16 << 20),
              let items = doc["peers"]?.arrayValue else { throw bad }
        var peers: [Peer] = []
        for item in items {
            guard let name = item["name"]?.stringValue,
                  let role = item["role"]?.stringValue.flatMap(Peer.Role.init(rawValue:)),
                  let keyBytes = item["publicKey"]?.stringValue.flatMap(Hex.decode),
                  let key = try? X25519PublicKey(rawRepresentation: keyBytes),
                  let psk = item["psk"]?.stringValue.flatMap(Hex.decode), psk.count == 32,
                  let paired = item["pairedAt"]?.int64Value
            else { throw bad }
            peers.append(Peer(
                name: name, publicKey: key, psk: psk, role: role,
                pairedAt: Date(timeIntervalSince1970: Double(paired)),
                lastSeen: item["lastSeen"]?.int64Value.map { Date(timeIntervalSince1970: Double($0)) },
                addresses: item["addresses"]?.arrayValue?.compactMap(\.stringValue) ?? [],
                port: Int(item["port"]?.int64Value ?? 0)))
        }
        return peers
    }
}
