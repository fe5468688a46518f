import Foundation
import SpeakBridgeProtocol
import SpeakBridgeStore

/// Answers the CLI on the control socket. Runs on the control thread; state owned by the daemon's queue is
/// read by hopping onto it synchronously.
extension Daemon {
    func control(_ request: JSONValue) -> JSONValue {
        switch request["cmd"]?.stringValue {
        case "status": return queue.sync { status() }
        case "pair": return pair(web: request["web"]?.boolValue == true)
        case "devices": return ControlReply.success([("devices", devicesJSON())])
        case "revoke":
            guard let text = request["id"]?.stringValue else { return ControlReply.failure("revoke needs an id") }
            return revoke(text)
        default:
            return ControlReply.failure("unknown command", hint: "this daemon speaks status, pair, devices, revoke")
        }
    }

    func status() -> JSONValue {
        let names = Dictionary(peers.all.map { ($0.id, $0.name) }, uniquingKeysWith: { a, _ in a })
        let sessions: [JSONValue] = ledgers.flatMap { device, ledger in
            ledger.allSessions.map { session, entry in
                JSONValue.object([("device", .string(device.description)), ("name", .string(names[device] ?? "")),
                                  ("session", .string(session)), ("delivered", .integer(Int64(entry.delivered)))])
            }
        }
        let connected = connectionDevice.values.reduce(into: [DeviceID: Int]()) { $0[$1, default: 0] += 1 }
            .sorted { $0.key.description < $1.key.description }
            .map { JSONValue.object([("device", .string($0.key.description)), ("name", .string(names[$0.key] ?? "")),
                                     ("connections", .integer(Int64($0.value)))]) }
        let sinks: [JSONValue] = pipeline.health().map { h in
            var m: [(String, JSONValue)] = [("sink", .string(h.label)), ("healthy", .bool(h.problem == nil)),
                                            ("queued", .integer(Int64(h.queued)))]
            if let p = h.problem { m.append(("problem", .string(p))) }
            return .object(m)
        }
        var mdns: [(String, JSONValue)] = [("enabled", .bool(discovery != nil))]
        if let d = discovery {
            mdns.append(("state", .string(d.stateDescription)))
            mdns.append(("active", .bool(d.isActive)))
        } else {
            mdns.append(("state", .string("disabled (--no-mdns)")))
        }
        return ControlReply.success([
            ("id", .string(identity.deviceID.description)),
            ("name", .string(serviceName)),
            ("pid", .integer(Int64(getpid()))),
            ("host", .string(options.host)),
            ("port", .integer(Int64(server.port))),
            ("addresses", .array(NetworkAddresses.forListening(host: options.host).map { .string($0.description) })),
            ("uptime", .integer(Int64(Date().timeIntervalSince(startedAt)))),
            ("pairing", .bool(codes.isActive)),
            ("sinks", .array(sinks)),
            ("devices", devicesJSON()),
            ("connections", .integer(Int64(machines.count))),
            ("authenticated", .integer(Int64(connectionDevice.count))),
            ("connected", .array(connected)),
            ("sessions", .array(sessions)),
            ("chunksDelivered", .integer(Int64(stats.chunksDelivered))),
            ("duplicatesDropped", .integer(Int64(stats.duplicatesDropped))),
            // Each closed connection counts once, in one of these (see `DaemonStats`).
            ("closedNormally", .integer(Int64(stats.closedNormally))),
            ("closedOnError", .integer(Int64(stats.closedOnError))),
            ("rejected", .integer(Int64(stats.rejectedConnections))),
            ("pairingFailures", .integer(Int64(stats.pairingFailures))),
            ("mdns", .object(mdns)),
            ("web", web.status(host: options.host, server: server)),
        ])
    }

    func pair(web wanted: Bool = false) -> JSONValue {
        if wanted, let refusal = web.pairingRefusal(server: server) { return refusal }
        do {
            let addresses = NetworkAddresses.forListening(host: options.host)
            let code = try codes.issue(publicKey: identity.publicKey, port: server.port, addresses: addresses)
            Console.info("pairing code issued, valid for \(options.pairingLifetime) s")
            return ControlReply.success([
                ("code", .string(code.encoded())),
                ("expires", .integer(Int64(code.expiry))),
                ("lifetime", .integer(Int64(options.pairingLifetime))),
                ("id", .string(identity.deviceID.description)),
            ] + (wanted ? web.pairingMembers(code: code.encoded(), host: options.host, server: server) : []))
        } catch {
            return ControlReply.failure("cannot issue a pairing code: \(error)")
        }
    }

    func devicesJSON() -> JSONValue {
        .array(peers.all.map { peer in
            var m: [(String, JSONValue)] = [
                ("id", .string(peer.id.description)), ("name", .string(peer.name)),
                ("role", .string(peer.role.rawValue)), ("kind", .string(peer.kind.rawValue)),
                ("pairedAt", .integer(Int64(peer.pairedAt.timeIntervalSince1970))),
            ]
            if let seen = peer.lastSeen { m.append(("lastSeen", .integer(Int64(seen.timeIntervalSince1970)))) }
            if let agent = peer.agent { m.append(("agent", .string(agent))) }
            let delivered = progress.entries()
                .filter { $0.key.device == peer.id }
                .reduce(into: [String: UInt64]()) { acc, e in acc[e.key.session] = max(acc[e.key.session] ?? 0, e.value) }
            m.append(("delivered", .object(delivered.sorted { $0.key < $1.key }.map { ($0.key, .integer(Int64($0.value))) })))
            return .object(m)
        })
    }

    func revoke(_ text: String) -> JSONValue {
        let matches = peers.matches(text)
        if matches.count > 1 {
            // Several devices share the name (or an ID prefix): never guess; the CLI lists them and asks for the ID.
            var reply = ControlReply.failure("\(matches.count) paired devices match \"\(text)\"",
                                             hint: "say which one by its ID: `speakbridge devices revoke ID`")
            if case .object(var m) = reply {
                m.append(("matches", .array(matches.map(Self.deviceSummary))))
                reply = .object(m)
            }
            return reply
        }
        guard let peer = matches.first else {
            return ControlReply.failure("no paired device matches \"\(text)\"", hint: "list them with `speakbridge devices`")
        }
        do {
            try peers.remove(id: peer.id)
        } catch {
            return ControlReply.failure(error.description, hint: error.hint)
        }
        queue.sync { disconnect(peer.id) }
        Console.info("revoked \"\(peer.name)\" (\(peer.id))")
        return ControlReply.success([("id", .string(peer.id.description)), ("name", .string(peer.name))])
    }
}

extension Daemon {
    /// ID, name, role and last seen of a device, for lists of matches.
    static func deviceSummary(_ peer: Peer) -> JSONValue {
        var m: [(String, JSONValue)] = [("id", .string(peer.id.description)), ("name", .string(peer.name)),
                                        ("role", .string(peer.role.rawValue))]
        if let seen = peer.lastSeen { m.append(("lastSeen", .integer(Int64(seen.timeIntervalSince1970)))) }
        return .object(m)
    }
}

/// The daemon's counters, as `status --json` shows them. Every connection that the daemon closes after a `close`
/// action counts once, in exactly one of: `closedNormally` (the device said bye), `closedOnError` (an
/// authenticated device broke the session or reported an error), `rejected` (refused before a session: unknown or
/// revoked device, failed or replayed handshake, protocol violation in a handshake) or `pairingFailures` (a
/// pairing handshake with a wrong or stale code; counted once, not also as `rejected`).
struct DaemonStats {
    var chunksDelivered: UInt64 = 0
    var duplicatesDropped: UInt64 = 0
    var closedNormally: UInt64 = 0
    var closedOnError: UInt64 = 0
    var rejectedConnections: UInt64 = 0
    var pairingFailures: UInt64 = 0

    /// Counts one `close` action. `wasAuthenticated`: the connection had a session (before this batch);
    /// `pairingFailed`: the same batch reported `pairingAttemptFailed` (already counted there).
    mutating func countClose(reason: String, wasAuthenticated: Bool, pairingFailed: Bool) {
        if pairingFailed { return }
        if wasAuthenticated {
            // ResponderMachine's reason for a `bye` (see its handleSessionMessage; a test pins the wording).
            if reason.hasSuffix(" said bye") { closedNormally += 1 } else { closedOnError += 1 }
        } else {
            rejectedConnections += 1
        }
    }
}
