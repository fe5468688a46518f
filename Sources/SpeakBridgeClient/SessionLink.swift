import Dispatch
import FoundationEssentials
import SpeakBridgeClientCore
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeWebSocket
import SpeakBridgeSupport

/// One authenticated session with a paired desktop, found by its key, for a role that only needs messages in
/// and out (`config`; `send` drives `ClientCore`, which has the same `LinkCore` inside).
///
/// A shell: `LinkCore` decides which addresses are dialed, in which order, which connection wins and when the
/// desktop is unreachable or refused; this carries its actions out (`LinkDriver`), saves the address that
/// worked in peers.json, and turns the core's outcomes into `Event`s on `queue`.
///
/// `@unchecked Sendable`: `core` and `notice` are used on `queue` only (every method but `shutdown` must be called
/// there, and driver events arrive there); `shutdown` touches only the driver's `Sendable` client.
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

    let desktop: Peer
    let peers: PeerStore
    let handler: Handler
    let driver: LinkDriver
    // Owned by `queue`.
    var core: LinkCore
    /// Where the link's own notices go (text, is a warning).
    var notice: (String, Bool) -> Void = { text, warning in warning ? Console.warning(text) : Console.info(text) }
    /// How many of the desktop's addresses peers.json keeps (as many as a pairing code carries).
    static let rememberedAddresses = LinkCore.rememberedAddresses

    init(identity: Identity, desktop: Peer, peers: PeerStore, agent: String, extraCandidates: [Candidate],
         queue: LockedQueue, onEvent: @escaping @Sendable (Event) -> Void) throws(ClientError) {
        self.desktop = desktop
        self.peers = peers
        self.handler = Handler(call: onEvent)
        core = LinkCore(intent: .session, firstMessage: .hello(agent: agent), localStatic: identity.privateKey,
                        desktopKey: desktop.publicKey, psk: desktop.psk, known: Self.known(desktop),
                        extra: extraCandidates)
        do {
            driver = try LinkDriver(queue: queue)
        } catch {
            throw ClientError("cannot start the WebSocket client: \(error)")
        }
        driver.onEvent = { [weak self] event in self?.handle(event) }
    }

    /// The addresses peers.json remembers for the desktop, most recent first.
    static func known(_ desktop: Peer) -> [Candidate] {
        desktop.addresses.map { Candidate(host: $0, port: desktop.port, source: "last known") }
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

    /// Starts (or restarts) dialing. Must be called on `queue`.
    func connect() {
        driver.findDesktop(desktop.id)
        perform(core.connect())
    }

    /// Encrypts and sends on the established session. Must be called on `queue`.
    func send(_ messages: [Message]) { perform(core.send(messages)) }

    /// Closes the established session (a new `connect` may follow). Must be called on `queue`.
    func drop() { perform(core.drop()) }

    /// Closes everything. Must be called on `queue`.
    func hangUp() {
        driver.stopFinding()
        perform(core.hangUp())
    }

    func shutdown() { driver.shutdown() }

    func handle(_ event: LinkDriver.Event) {
        switch event {
        case .opened(let id, let subprotocol): perform(core.opened(id, subprotocol: subprotocol))
        case .frame(let id, let bytes): perform(core.frame(id, bytes))
        case .closed(let id, let reason): perform(core.closed(id, reason: reason))
        case .found(let list): perform(core.found(list))
        }
    }

    func perform(_ actions: [LinkCore.Action]) {
        for action in actions {
            switch action {
            case .dial(let id, let candidate, let path, let offer):
                driver.dial(id, candidate, path: path, subprotocols: offer)
            case .send(let id, let frame): driver.send(frame, on: id)
            case .close(let id): driver.close(id)
            case .remember(let candidate): Self.remember(candidate, of: desktop, in: peers)
            case .established(let candidate, let moved):
                if moved { notice("desktop \"\(desktop.name)\" moved to \(candidate); switching", false) }
                handler.call(.established(candidate))
            case .received(let message): handler.call(.received(message))
            case .lost(let reason): handler.call(.lost(reason))
            case .machineClosed(let reason, let chosen):
                if chosen { notice("closing the connection: \(reason)", true) }
            case .exhausted(let reason, let refused): handler.call(.unreachable(reason, refused: refused))
            case .paired, .handshakeClosed: break
            }
        }
    }

    /// Saves where the desktop was reached: most recent first; the oldest are forgotten, so a desktop that
    /// changes address often does not leave an ever longer list of dead addresses to dial.
    /// (peers.json is rewritten only when this changes something or a minute has passed: `PeerStore.seen`.)
    static func remember(_ c: Candidate, of desktop: Peer, in peers: PeerStore) {
        _ = try? peers.seen(key: desktop.publicKey, address: (c.host, c.port), keep: rememberedAddresses)
    }

    /// Whether `remember` would rewrite peers.json (it returns at once otherwise: the same address, seen less than a
    /// minute ago).
    static func wouldRemember(_ c: Candidate, of desktop: Peer, in peers: PeerStore) -> Bool {
        peers.wouldRecord(key: desktop.publicKey, address: (c.host, c.port), keep: rememberedAddresses)
    }
}
