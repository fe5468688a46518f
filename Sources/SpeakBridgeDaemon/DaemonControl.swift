#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import SpeakBridgeControl
import SpeakBridgeCrypto
import SpeakBridgeDesktopCore
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore
import SpeakBridgeSupport

/// Answers the CLI on the control socket. Runs on a control thread: what the core knows is read as a snapshot on
/// its queue, what it must change is handed to it as an event; file work (peers.json) runs on the effects queue,
/// never on the core's.
extension Daemon {
    func answer(_ request: ControlRequest) -> ControlReply {
        switch request {
        case .status: return .status(status())
        case .pair(let web): return pair(web: web)
        case .devices: return .devices(DevicesReply(devices: devices()))
        case .revoke(let text): return revoke(text)
        case .typeHere: return typeHere()
        }
    }

    func status() -> StatusReply {
        let core = driver.read { $0.status }
        let mdns: StatusReply.MDNS
        if let d = discovery {
            mdns = .init(enabled: true, state: d.stateDescription, active: d.isActive, name: d.publishedName)
        } else {
            mdns = .init(enabled: false, state: "disabled (--no-mdns)", active: nil, name: nil)
        }
        return StatusReply(
            id: identity.deviceID.description, name: serviceName, pid: Int64(getpid()), host: options.host,
            port: Int64(server.port),
            addresses: NetworkAddresses.forListening(host: options.host).map(\.description),
            uptime: Int64(Date().timeIntervalSince(startedAt)), pairing: core.pairingActive,
            sinks: pipeline.health().map {
                .init(label: $0.label, problem: $0.problem, queued: Int64($0.queued), method: $0.method)
            },
            devices: devices(),
            connections: Int64(core.connections), authenticated: Int64(core.authenticated),
            connected: core.connected.map {
                .init(device: $0.device.description, name: $0.name, connections: Int64($0.connections))
            },
            sessions: core.sessions.map {
                .init(device: $0.device.description, name: $0.name, session: $0.session, delivered: Self.clamp($0.delivered))
            },
            chunksDelivered: Self.clamp(core.stats.chunksDelivered),
            duplicatesDropped: Self.clamp(core.stats.duplicatesDropped),
            closedNormally: Self.clamp(core.stats.closedNormally), closedOnError: Self.clamp(core.stats.closedOnError),
            rejected: Self.clamp(core.stats.rejected), pairingFailures: Self.clamp(core.stats.pairingFailures),
            mdns: mdns, web: web.status(host: options.host, server: server))
    }

    static func clamp(_ v: UInt64) -> Int64 { v > UInt64(Int64.max) ? .max : Int64(v) }

    /// `web`: also the page's URL with the code in its fragment, and a code for the browser route only. The browser
    /// front starts first (it must listen before its URL is shown); refused when the route is off or the front
    /// cannot start.
    func pair(web wanted: Bool = false) -> ControlReply {
        if wanted, let refusal = web.startForPairing(server: server) { return .failure(refusal) }
        do {
            let addresses = NetworkAddresses.forListening(host: options.host)
            let secret = SymmetricKey.random()
            // Whole seconds, the expiry the code carries: the desktop enforces exactly the rule a client can check
            // (`now < expiry`, PROTOCOL.md "Expiry"), not a fraction of a second more.
            let expiry = UInt32(Date().timeIntervalSince1970 + Double(options.pairingLifetime))
            let code = try PairingCode(publicKey: identity.publicKey.rawRepresentation, secretKey: secret,
                                       expiry: expiry, port: UInt16(server.port),
                                       addresses: Array(addresses.prefix(PairingCode.maxAddresses)))
            // A `pair --web` code pairs through the browser route only (PairingCodeState): used with a native
            // `join`, it would pair a native device, which may pull and push config.
            driver.send(.pairingCodeIssued(secret, expiry: Double(expiry), kind: wanted ? .browser : .native))
            Console.info("pairing code issued, valid for \(options.pairingLifetime) s")
            return .pair(PairReply(code: code.encoded(), expires: Int64(code.expiry),
                                   lifetime: Int64(options.pairingLifetime), id: identity.deviceID.description,
                                   web: wanted ? web.pairing(code: code.encoded(), host: options.host) : nil))
        } catch {
            return .failure(ControlFailure("cannot issue a pairing code: \(error)"))
        }
    }

    func devices() -> [DeviceEntry] {
        let entries = progress.entries()
        return peers.all.map { peer in
            let delivered = entries
                .filter { $0.key.device == peer.id }
                .reduce(into: [String: UInt64]()) { acc, e in acc[e.key.session] = max(acc[e.key.session] ?? 0, e.value) }
            return DeviceEntry(id: peer.id.description, name: peer.name, role: peer.role.rawValue,
                               pairedAt: Int64(peer.pairedAt.timeIntervalSince1970),
                               lastSeen: peer.lastSeen.map { Int64($0.timeIntervalSince1970) },
                               delivered: delivered.sorted { $0.key < $1.key }.map { ($0.key, Self.clamp($0.value)) },
                               kind: peer.kind.rawValue, agent: peer.agent)
        }
    }

    /// Removes the device from peers.json (on the effects queue, after any pairing or last-seen write queued
    /// before), then tells the core, which closes its connections and drops its delivery state, then the config
    /// module.
    func revoke(_ text: String) -> ControlReply {
        let matches = peers.matches(text)
        if matches.count > 1 {
            // Several devices share the name (or an ID prefix): never guess; the CLI lists them and asks for the ID.
            return .failure(ControlFailure("\(matches.count) paired devices match \"\(text)\"",
                                           hint: "say which one by its ID: `speakbridge devices revoke ID`",
                                           matches: matches.map(Self.deviceSummary)))
        }
        guard let peer = matches.first else {
            return .failure(ControlFailure("no paired device matches \"\(text)\"", hint: "list them with `speakbridge devices`"))
        }
        let removal: Result<Void, StoreError> = driver.effects.sync { [peers] in
            do throws(StoreError) {
                try peers.remove(id: peer.id)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        if case .failure(let error) = removal { return .failure(ControlFailure(error.description, hint: error.hint)) }
        driver.send(.revoked(peer.id))
        // The config module forgets what was staged for it and what it offered: on its queue (it writes the config
        // store), never beside a config call; the reply waits for it. A call of that device still waiting in the
        // round robin (CoreDriver.configWork) runs later and is refused: the device is no longer in peers.json.
        if let handler = options.configHandler { driver.configCalls.sync { handler.deviceRevoked(peer.id) } }
        Console.info("revoked \"\(peer.name)\" (\(peer.id))")
        return .revoked(RevokeReply(id: peer.id.description, name: peer.name))
    }

    /// ID, name, role and last seen of a device, for lists of matches.
    static func deviceSummary(_ peer: Peer) -> DeviceSummary {
        DeviceSummary(id: peer.id.description, name: peer.name, role: peer.role.rawValue,
                      lastSeen: peer.lastSeen.map { Int64($0.timeIntervalSince1970) })
    }
}

extension Daemon {
    /// `speakbridge type --here`: every typing sink adopts the window focused now (held text is typed there).
    func typeHere() -> ControlReply {
        let typing = pipeline.sinks.compactMap { $0 as? FocusTrackingSink }
        guard !typing.isEmpty else {
            return .failure(ControlFailure("this daemon has no typing sink", hint: "start it with `speakbridge serve --sink type`"))
        }
        var targets: [String] = []
        for sink in typing {
            do throws(SinkError) {
                targets.append(try sink.retarget())
            } catch {
                return .failure(ControlFailure("\(sink.label): \(error.message)", hint: error.hint))
            }
        }
        Console.info("type --here: " + targets.joined(separator: "; "))
        return .typeHere(TypeHereReply(targets: targets))
    }
}
