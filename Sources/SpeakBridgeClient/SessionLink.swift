import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeWebSocket
import SpeakBridgeSupport

/// One authenticated session with a paired desktop, found by its key. Used by `send` and `config`.
///
/// Flow: dial every candidate at once (mDNS results for the desktop's ID as they arrive, the addresses that
/// worked last, `--address`) → a Noise IKpsk1 handshake (per-pair psk, prologue "speakbridge.v1 session") on
/// each connection that opens → the first to complete is kept, the others closed → the address that worked is
/// remembered. Events arrive on `queue`.
final class SessionLink: @unchecked Sendable {
    enum Event {
        case established(Candidate)
        case received(Message)
        /// The established session ended.
        case lost(String)
        /// Nothing got as far as a session. `refused` is true when a connection opened but the handshake was
        /// not answered (the desktop does not know this device, or it is another desktop).
        case unreachable(String, refused: Bool)
    }

    struct Handler: Sendable { let call: @Sendable (Event) -> Void }

    let identity: Identity
    let desktop: Peer
    let peers: PeerStore
    let agent: String
    let extraCandidates: [Candidate]
    let queue: DispatchQueue
    let handler: Handler
    var dialer: Dialer!
    // Owned by `queue`.
    var machines: [WebSocketConnectionID: InitiatorMachine] = [:]
    var active: WebSocketConnectionID?
    var finder: DesktopFinder?
    var mdnsCandidates: [Candidate] = []
    var refused = false
    /// The address whose connection last took message 1 and closed without an answer (for `send`'s error).
    private(set) var refusedBy: Candidate?
    /// The address of each open connection (the dialer forgets it before reporting the close).
    var openedAt: [WebSocketConnectionID: Candidate] = [:]
    private(set) var connectedTo: Candidate?
    /// Where the link's own notices go (text, is a warning): `send` routes them around its status line.
    var notice: (String, Bool) -> Void = { text, warning in warning ? Console.warning(text) : Console.info(text) }
    /// How many of the desktop's addresses peers.json keeps (as many as a pairing code carries).
    static let rememberedAddresses = PairingCode.maxAddresses

    init(identity: Identity, desktop: Peer, peers: PeerStore, agent: String, extraCandidates: [Candidate],
         queue: DispatchQueue, onEvent: @escaping @Sendable (Event) -> Void) throws(ClientError) {
        self.identity = identity
        self.desktop = desktop
        self.peers = peers
        self.agent = agent
        self.extraCandidates = extraCandidates
        self.queue = queue
        self.handler = Handler(call: onEvent)
        do {
            dialer = try Dialer(queue: queue) { [weak self] event in self?.handle(event) }
        } catch {
            throw ClientError("cannot start the WebSocket client: \(error)")
        }
    }

    /// This installation's identity and paired devices, as `send` and `config` need them.
    static func localState(_ home: Home) throws(ClientError) -> (Identity, PeerStore) {
        do {
            return (try Identity.loadOrCreate(home), try PeerStore(home: home))
        } catch {
            throw ClientError(error.description, hint: error.hint)
        }
    }

    /// The paired desktop `query` names (ID, ID prefix or name), or the only one.
    static func pairedDesktop(_ peers: PeerStore, _ query: String?) throws(ClientError) -> Peer {
        if let query {
            let matches = peers.matches(query).filter { $0.role == .desktop }
            guard matches.count <= 1 else {
                let list = matches.map { "\($0.id) \"\($0.name)\"" }.joined(separator: ", ")
                throw ClientError("\(matches.count) paired desktops match \"\(query)\": \(list)",
                                  hint: "say which one with --to ID")
            }
            guard let peer = matches.first else {
                throw ClientError("no paired desktop matches \"\(query)\"", hint: "list them with `speakbridge devices`")
            }
            return peer
        }
        let desktops = peers.all.filter { $0.role == .desktop }
        guard let only = desktops.first else {
            throw ClientError("this installation is not paired with any desktop",
                              hint: "run `speakbridge pair` on the desktop, then `speakbridge join CODE` here")
        }
        guard desktops.count == 1 else {
            throw ClientError("paired with \(desktops.count) desktops; say which one",
                              hint: "use --to NAME or --to ID (see `speakbridge devices`)")
        }
        return only
    }

    var isEstablished: Bool { active != nil }

    /// Starts (or restarts) dialing. Must be called on `queue`.
    func connect() {
        guard active == nil else { return }
        refused = false
        if finder == nil {
            finder = DesktopFinder(desktop: desktop.id, queue: queue) { [weak self] found in
                guard let self else { return }
                self.mdnsCandidates = found
                if self.active == nil {
                    // A new address from mDNS is tried right away, beside whatever is in flight.
                    self.dialer.dial(found, path: ConnectionIntent.session.path)
                } else if let current = self.connectedTo, !found.contains(current) {
                    // The desktop is announced at other addresses than the one we are connected to: it has
                    // probably moved, and a connection to a vanished address only fails when acks stall.
                    // Dial the new ones beside it; the first to prove the key takes over.
                    self.dialer.probe(found, path: ConnectionIntent.session.path)
                }
            }
        }
        dialer.dial(candidates(), path: ConnectionIntent.session.path)
    }

    func candidates() -> [Candidate] {
        let current = peers.find(desktop.id.description) ?? desktop
        var list = mdnsCandidates
        list += current.addresses.map { Candidate(host: $0, port: current.port, source: "last known") }
        list += extraCandidates
        var seen = Set<Candidate>()
        return list.filter { seen.insert($0).inserted }
    }

    /// Encrypts and sends on the established session. Must be called on `queue`.
    func send(_ messages: [Message]) {
        guard !messages.isEmpty, let id = active, var m = machines[id] else { return }
        for message in messages {
            for action in m.encryptAndSend(message) {
                if case .send(let frame) = action { dialer.send(frame, on: id) }
            }
        }
        machines[id] = m
    }

    /// Closes the established session (a new `connect` may follow). Must be called on `queue`.
    func drop() {
        if let active { dialer.close(active) }
    }

    /// Closes everything. Must be called on `queue`.
    func hangUp() {
        finder?.stop()
        dialer.hangUp()
    }

    func shutdown() { dialer.shutdown() }

    func handle(_ event: Dialer.Event) {
        switch event {
        case .opened(let id, let candidate):
            openedAt[id] = candidate
            do {
                var m = try InitiatorMachine(intent: .session, localStatic: identity.privateKey,
                                             desktopKey: desktop.publicKey, psk: desktop.psk,
                                             firstMessage: .hello(agent: agent))
                dialer.send(try m.start(), on: id)
                machines[id] = m
            } catch {
                dialer.close(id)
            }
        case .message(let id, let frame):
            guard var m = machines[id] else { return }
            let actions = m.receive(frame)
            machines[id] = m
            for action in actions { perform(action, on: id) }
        case .closed(let id, let reason):
            let candidate = openedAt.removeValue(forKey: id)
            let hadMachine = machines.removeValue(forKey: id) != nil
            if id == active {
                active = nil
                handler.call(.lost(reason))
            } else if hadMachine {
                refused = true  // it opened, took message 1, and closed without a verified answer
                refusedBy = candidate ?? refusedBy
            }
        case .exhausted(let reason):
            if active == nil { handler.call(.unreachable(reason, refused: refused)) }
        }
    }

    func perform(_ action: InitiatorMachine.Action, on id: WebSocketConnectionID) {
        switch action {
        case .send(let frame):
            dialer.send(frame, on: id)
        case .established:
            if let old = active {
                // A probe (see `connect`) reached the desktop at its announced address: move there. The
                // owner sees a second `.established` and resumes; the desktop drops duplicates.
                guard dialer.probing.contains(id) else {
                    dialer.close(id)
                    return
                }
                machines[old] = nil
                notice("desktop \"\(desktop.name)\" moved to \(dialer.candidate(id)?.description ?? "?"); switching", false)
            }
            active = id
            dialer.choose(id)
            connectedTo = dialer.candidate(id)
            rememberAddress()
            handler.call(.established(connectedTo ?? Candidate(host: "?", port: 0, source: "?")))
        case .received(let message):
            if id == active { handler.call(.received(message)) }
        case .paired:
            break
        case .close(let reason):
            if id == active { notice("closing the connection: \(reason)", true) }
            dialer.close(id)
        }
    }

    func rememberAddress() {
        guard let c = connectedTo else { return }
        try? peers.update(key: desktop.publicKey) { peer in
            // Most recent first; the oldest are forgotten, so a desktop that changes address often does not
            // leave an ever longer list of dead addresses to dial.
            peer.addresses = Array(([c.host] + peer.addresses.filter { $0 != c.host }).prefix(Self.rememberedAddresses))
            peer.port = c.port
            peer.lastSeen = Date()
        }
    }
}
