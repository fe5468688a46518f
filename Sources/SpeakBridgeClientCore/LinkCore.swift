import SpeakBridgeCrypto
import SpeakBridgeProtocol

/// Dialing and the handshake of one client role (a session, or a pairing), as a value: which addresses are
/// tried, in which order, which connection wins, when the desktop is unreachable and when it refused. No
/// socket, no file, no clock: the shell carries out `dial`/`send`/`close` and feeds back what happened.
///
/// Flow: `connect` dials every candidate at once (mDNS results for the desktop's ID, the addresses that worked
/// last, most recent first, then `--address`) → each attempt that opens gets its own Noise IKpsk1 handshake
/// (`InitiatorMachine`) → the first whose reply proves the desktop's key is chosen and every other attempt
/// closed → the address is remembered. So a dead address never delays a live one, and an address that answers
/// with another key (another desktop got that IP, or a spoofed mDNS record) simply loses.
/// While chosen, mDNS announcing the desktop elsewhere starts probes beside the live connection ("make before
/// break"); a probe that proves the key takes over (`moved`), one that fails just closes.
/// Nothing left to try and nothing chosen: `exhausted`, with `refused` when some attempt took message 1 and
/// closed without an answer (the desktop does not know this device, or it is another desktop).
public struct LinkCore {
    public enum Action {
        // Carried out by the shell.
        /// `subprotocols`: what to offer, preferred first (`subprotocols(preferring: preferredCipher)`).
        case dial(AttemptID, Candidate, path: String, subprotocols: [String])
        case send(AttemptID, [UInt8])
        case close(AttemptID)
        // Outcomes, for the role that owns the link.
        /// A session is up (again): the owner must send a transport message at once (`resume`, a config request).
        case established(Candidate, moved: Bool)
        case received(Message)
        case paired(PairingResult, Candidate)
        /// The chosen connection ended.
        case lost(String)
        /// An attempt not chosen closed while its handshake ran: it took message 1 and did not answer.
        case handshakeClosed(Candidate, String)
        /// The handshake machine gave up on a connection (`chosen`: the chosen one) and it is being closed.
        case machineClosed(String, chosen: Bool)
        /// Nothing is open or being tried, nothing is chosen: the reasons of the failures.
        case exhausted(String, refused: Bool)
        /// The desktop was reached at this address: to be saved (peers.json).
        case remember(Candidate)
    }

    enum Phase {
        case dialing
        case handshaking(InitiatorMachine)
        /// Its machine is `live`.
        case chosen
        /// The chosen connection that a probe replaced: closing, reports nothing.
        case superseded
    }

    struct Attempt {
        var candidate: Candidate
        var phase: Phase
        /// Dialed beside a chosen connection (`found` while chosen).
        var probe: Bool
        /// A `close` was asked for; its `closed` is still to come.
        var closing = false
        /// Closed by `abandonHandshake`: no answer in time, which says nothing about this device (not a refusal).
        var abandoned = false
        /// The handshake with message 1 already sealed (`prepareHandshakes`) under `preferredCipher`, for `opened`
        /// to send when the desktop chose that cipher.
        var prepared: (machine: InitiatorMachine, first: [UInt8])?
    }

    public let intent: ConnectionIntent
    let firstMessage: Message
    let localStatic: X25519PrivateKey
    let desktopKey: X25519PublicKey
    let psk: SymmetricKey
    let extra: [Candidate]
    /// The Noise cipher offered first (`subprotocols(preferring:)`): AESGCM where this CPU has AES-NI — with it,
    /// libsodium seals and opens a line's message in about a third of ChaChaPoly's instructions — else ChaChaPoly.
    /// The desktop's answer decides (`opened`).
    public let preferredCipher: NoiseCipher
    /// Seconds the shell gives one TCP + WebSocket connect.
    public static let dialTimeout = 5
    /// How many of the desktop's addresses are remembered (as many as a pairing code carries).
    public static let rememberedAddresses = PairingCode.maxAddresses
    /// How many failure reasons are kept for `exhausted`.
    static let keptFailures = 8
    /// Seconds an attempt may wait for message 2 after sending message 1 (`abandonHandshake`): the desktop's own
    /// deadline for an unauthenticated connection.
    public static let handshakeTimeout = 5.0
    /// The most mDNS addresses dialed at once: anyone on the LAN may announce the desktop's (public) ID at as many
    /// addresses as it likes, and each is a socket.
    public static let maxAnnouncedAddresses = 16

    var attempts: [AttemptID: Attempt] = [:]
    /// The machine of the chosen attempt (whose entry in `attempts` says `.chosen`), kept out of the table so that
    /// each message is sealed and each frame opened in place: taking it out of the table and writing it back
    /// copied the attempt and its machine for every line. Nil while nothing is chosen.
    var live: InitiatorMachine?
    /// A `close` was asked for the chosen attempt (its `closing`, for the hot path that does not read the table).
    var liveClosing = false
    var lastID: UInt64 = 0
    public private(set) var chosen: AttemptID?
    var failures: [String] = []
    var refused = false
    /// The address whose connection last took message 1 and closed without an answer (for `send`'s error).
    public private(set) var refusedBy: Candidate?
    public private(set) var connectedTo: Candidate?
    var mdns: [Candidate] = []
    /// Where the desktop was reached before, most recent first.
    public private(set) var known: [Candidate]

    /// - Parameters:
    ///   - psk: the per-pair psk (session) or the pairing code's secret (pair).
    ///   - known: the addresses that worked last (session), or the code's (pair).
    ///   - extra: `--address`, tried after the others.
    ///   - cipher: the cipher to offer first; by default AESGCM where this CPU has AES-NI, else ChaChaPoly.
    public init(intent: ConnectionIntent, firstMessage: Message, localStatic: X25519PrivateKey,
                desktopKey: X25519PublicKey, psk: SymmetricKey, known: [Candidate], extra: [Candidate],
                cipher: NoiseCipher? = nil) {
        self.preferredCipher = cipher ?? Self.defaultCipher
        self.intent = intent
        self.firstMessage = firstMessage
        self.localStatic = localStatic
        self.desktopKey = desktopKey
        self.psk = psk
        self.known = known
        self.extra = extra
        // The table's storage now rather than at the first dial: the first `[AttemptID: Attempt]` of a process makes
        // the Swift runtime check `AttemptID: Hashable` against every conformance record (~0.2 M instructions). A
        // `send` makes its core while its socket thread creates the libwebsockets context, which it waits for anyway.
        attempts.reserveCapacity(4)
    }

    public var isEstablished: Bool {
        chosen != nil && live?.isEstablished == true
    }

    /// AESGCM where libsodium can run it (AES-NI and CLMUL), else ChaChaPoly.
    public static var defaultCipher: NoiseCipher { NoiseCipher.aesGCM.isAvailable ? .aesGCM : .chaChaPoly }

    /// What a dial offers as `Sec-WebSocket-Protocol`, preferred first: both subprotocols when AESGCM is preferred
    /// (a desktop without AES-NI, or an older one whose browser route is off, answers `speakbridge.v1`).
    public static func subprotocols(preferring cipher: NoiseCipher) -> [String] {
        cipher == .aesGCM ? [SpeakBridgeProtocol.aesGCMSubprotocol, SpeakBridgeProtocol.subprotocol]
            : [SpeakBridgeProtocol.subprotocol]
    }

    /// Every address worth trying now, deduplicated, in order: mDNS, last known, `--address`.
    public var candidates: [Candidate] {
        (mdns + known + extra).uniquedInOrder()
    }

    /// Where attempts are open or being made (for tests and reports).
    public var attemptCount: Int { attempts.count }

    // MARK: - Commands from the owner

    /// Starts (or restarts) dialing, unless a connection is chosen.
    public mutating func connect() -> [Action] {
        guard chosen == nil else { return [] }
        refused = false
        return dial(candidates)
    }

    /// Encrypts and sends on the chosen, established session (nothing otherwise).
    public mutating func send(_ messages: [Message]) -> [Action] {
        guard !messages.isEmpty, let id = chosen, live?.isEstablished == true else { return [] }
        var out: [Action] = []
        out.reserveCapacity(messages.count)
        for message in messages {
            switch live?.seal(message) ?? .notReady {
            case .frame(let frame): out.append(.send(id, frame))
            case .closed(let reason):
                // A message the session cannot seal (too large for a frame): say so and close, rather than
                // keep a connection that silently sends nothing until the ack timeout.
                return out + [.machineClosed(reason, chosen: true)] + close(id)
            case .notReady: continue
            }
        }
        return out
    }

    /// `send(_:)` of what the window sends (`OutboxWindow.Outgoing`): its encoded batches sealed as they are.
    public mutating func send(outgoing: consuming [OutboxWindow.Outgoing]) -> [Action] {
        guard !outgoing.isEmpty, let id = chosen, live?.isEstablished == true else { return [] }
        var out: [Action] = []
        out.reserveCapacity(outgoing.count)
        // Taken out of the array one by one (reversed, then popped): a batch's bytes then have one owner, and are
        // sealed in place. Read from the array, they were shared, and sealing copied each batch to append its tag.
        outgoing.reverse()
        while let item = outgoing.popLast() {
            let sealed: InitiatorMachine.Sealed
            switch consume item {
            case .message(let message): sealed = live?.seal(message) ?? .notReady
            case .encoded(let bytes): sealed = live?.seal(encoded: bytes) ?? .notReady
            }
            switch sealed {
            case .frame(let frame): out.append(.send(id, frame))
            case .closed(let reason): return out + [.machineClosed(reason, chosen: true)] + close(id)  // as `send`
            case .notReady: continue
            }
        }
        return out
    }

    /// `send([message])` on the established session without its arrays: the chosen attempt and what sealing
    /// made of the message; nil (nothing changed) when no session is established.
    public mutating func seal(_ message: Message) -> (AttemptID, InitiatorMachine.Sealed)? {
        guard let id = chosen, live?.isEstablished == true, let sealed = live?.seal(message) else { return nil }
        return (id, sealed)
    }

    /// `seal(_:)` of a message already encoded (`OutboxWindow.appendAloneEncoded`).
    public mutating func seal(encoded plaintext: consuming [UInt8]) -> (AttemptID, InitiatorMachine.Sealed)? {
        guard let id = chosen, live?.isEstablished == true, let sealed = live?.seal(encoded: plaintext) else {
            return nil
        }
        return (id, sealed)
    }

    /// Closes the chosen connection (its `closed` then reports `lost`; a new `connect` may follow).
    public mutating func drop() -> [Action] {
        guard let chosen else { return [] }
        return close(chosen)
    }

    /// Closes everything.
    public mutating func hangUp() -> [Action] {
        attempts.keys.sorted().flatMap { close($0) }
    }

    // MARK: - Events from the shell

    /// mDNS found the desktop at these addresses.
    public mutating func found(_ list: [Candidate]) -> [Action] {
        mdns = Array(list.uniquedInOrder().prefix(Self.maxAnnouncedAddresses))
        let list = mdns
        if chosen == nil { return dial(list) }
        // Announced at other addresses than the one we are connected to: it has probably moved, and a
        // connection to a vanished address only fails when acks stall. Probe the new ones beside it.
        if intent == .session, let current = connectedTo, !list.contains(current) { return probe(list) }
        return []
    }

    /// Attempt `id`'s WebSocket is up; `subprotocol` is the one the desktop chose (its `101`), which selects the
    /// Noise cipher: `speakbridge.v1` → ChaChaPoly, `speakbridge.v1.aesgcm` → AESGCM. An answer that is not
    /// exactly one of those offered (none at all, a list, another name: lws lets some through) closes the attempt
    /// before anything is sent. A message 1 prepared under the other cipher is sealed again (a new ephemeral key).
    public mutating func opened(_ id: AttemptID, subprotocol: String?) -> [Action] {
        guard var a = attempts[id], !a.closing, case .dialing = a.phase else { return [] }
        if chosen != nil && !a.probe { return close(id) }
        let offered = Self.subprotocols(preferring: preferredCipher)
        guard let subprotocol, offered.contains(subprotocol),
              let cipher = SpeakBridgeProtocol.cipher(forSubprotocol: subprotocol) else {
            let reason = "the desktop's answer named none of the subprotocols offered ("
                + offered.joined(separator: ", ") + ")"
            return [.machineClosed(reason, chosen: false)] + close(id)
        }
        do {
            let reuse = cipher == preferredCipher ? a.prepared : nil
            let (m, first) = try reuse ?? handshake(cipher: cipher)
            a.prepared = nil
            a.phase = .handshaking(m)
            attempts[id] = a
            return [.send(id, first)]
        } catch {
            return close(id)
        }
    }

    /// Seals message 1 for every attempt still dialing that has none yet, so that `opened` only sends it. Its two
    /// Diffie-Hellman operations (e, es, s, ss) depend on nothing the desktop sends: a shell that calls this right
    /// after carrying out its dials computes them while TCP and the WebSocket upgrade are under way, instead of
    /// after. Each attempt still gets its own ephemeral key; nothing is sent before `opened`.
    public mutating func prepareHandshakes() {
        for id in attempts.keys.sorted() {
            guard let a = attempts[id], !a.closing, case .dialing = a.phase, a.prepared == nil else { continue }
            let prepared = try? handshake(cipher: preferredCipher)  // on failure `opened` tries again, and closes
            attempts[id]?.prepared = prepared
        }
    }

    /// How many attempts hold a sealed message 1 (for tests).
    public var preparedCount: Int { attempts.values.filter { $0.prepared != nil }.count }

    /// The message 1 sealed for attempt `id` (for tests: `opened` must send exactly it when the cipher matches).
    public func preparedMessage(_ id: AttemptID) -> [UInt8]? { attempts[id]?.prepared?.first }

    /// A fresh initiator (new ephemeral key) under `cipher`, and its message 1.
    func handshake(cipher: NoiseCipher) throws -> (machine: InitiatorMachine, first: [UInt8]) {
        var m = try InitiatorMachine(intent: intent, localStatic: localStatic, desktopKey: desktopKey, psk: psk,
                                     firstMessage: firstMessage, cipher: cipher)
        let first = try m.start()
        return (m, first)
    }

    public mutating func frame(_ id: AttemptID, _ bytes: [UInt8]) -> [Action] {
        let actions: [InitiatorMachine.Action]
        if id == chosen {
            guard !liveClosing, live != nil else { return [] }
            actions = live?.receive(bytes) ?? []
        } else {
            // Dialing, superseded or closing attempts take no frames.
            guard let index = attempts.index(forKey: id), !attempts.values[index].closing,
                  case .handshaking(var m) = attempts.values[index].phase else { return [] }
            attempts.values[index].phase = .dialing  // the only copy while it opens the frame; back below
            actions = m.receive(bytes)
            attempts.values[index].phase = .handshaking(m)
        }
        var out: [Action] = []
        for action in actions {
            switch action {
            case .send(let frame):
                // Pairing: a send after message 2 means message 2 proved the code's desktop. Keep this one.
                if intent == .pair && chosen != id { out += choose(id) }
                out.append(.send(id, frame))
            case .established:
                guard let a = attempts[id] else { continue }
                let (candidate, probe) = (a.candidate, a.probe)
                var moved = false
                if let old = chosen, old != id {
                    // Only a probe may replace a chosen connection; the desktop drops duplicates after `resume`.
                    guard probe else {
                        out += close(id)
                        continue
                    }
                    attempts[old]?.phase = .superseded
                    moved = true
                }
                out += choose(id)
                connectedTo = candidate
                remember(candidate)
                out.append(.remember(candidate))
                out.append(.established(candidate, moved: moved))
            case .received(let message):
                if chosen == id { out.append(.received(message)) }
            case .paired(let result):
                guard let candidate = attempts[id]?.candidate else { continue }
                out.append(.paired(result, candidate))
            case .close(let reason):
                out.append(.machineClosed(reason, chosen: chosen == id))
                out += close(id)
            }
        }
        return out
    }

    public mutating func closed(_ id: AttemptID, reason: String) -> [Action] {
        guard let a = attempts.removeValue(forKey: id) else { return [] }
        failures.append("\(a.candidate): \(reason)")
        if failures.count > Self.keptFailures { failures.removeFirst(failures.count - Self.keptFailures) }
        var out: [Action] = []
        let wasChosen = chosen == id
        if wasChosen {
            chosen = nil
            live = nil
            liveClosing = false
            out.append(.lost(reason))
        } else if case .handshaking = a.phase, chosen == nil, !a.abandoned {
            // It opened, took message 1, and closed without a verified answer. Only an address that proved the
            // desktop's key before (one that worked, `--address`, a pairing code's) speaks for the desktop: the
            // desktop's ID is public, so anyone on the LAN can announce it over mDNS and close every handshake —
            // which made `send` exit 77, "revoked?", while the real desktop slept.
            if vouched(a.candidate) {
                refused = true
                refusedBy = a.candidate
            }
            out.append(.handshakeClosed(a.candidate, reason))
        }
        if !wasChosen && chosen == nil && attempts.isEmpty {
            out.append(.exhausted(failures.joined(separator: "; "), refused: refused))
        }
        return out
    }

    /// Closes attempt `id` if it is still waiting for message 2 (the owner's clock says it waited too long): a
    /// peer that took the WebSocket and never answers would otherwise hold the round open, and no redial come.
    /// Not counted as a refusal.
    public mutating func abandonHandshake(_ id: AttemptID) -> [Action] {
        guard let a = attempts[id], case .handshaking = a.phase, chosen != id else { return [] }
        attempts[id]?.abandoned = true
        return close(id)
    }

    /// Whether attempts are waiting for message 2, and which (for the owner's handshake clock).
    public var handshaking: [AttemptID] {
        attempts.compactMap { id, a in if case .handshaking = a.phase, chosen != id { id } else { nil } }.sorted()
    }

    // MARK: - Inside

    /// An address not only announced over mDNS: one that worked before, `--address`, or a pairing code's.
    func vouched(_ c: Candidate) -> Bool {
        c.source != "mDNS" || known.contains(c) || extra.contains(c)
    }

    mutating func dial(_ list: [Candidate]) -> [Action] {
        guard chosen == nil else { return [] }
        let fresh = list.excluding(attempts.values.map(\.candidate))
        if fresh.isEmpty && attempts.isEmpty {
            return [.exhausted(list.isEmpty ? "no address known" : failures.joined(separator: "; "), refused: refused)]
        }
        return fresh.map { start($0, probe: false) }
    }

    mutating func probe(_ list: [Candidate]) -> [Action] {
        list.excluding(attempts.values.map(\.candidate)).map { start($0, probe: true) }
    }

    mutating func start(_ candidate: Candidate, probe: Bool) -> Action {
        lastID += 1
        let id = AttemptID(lastID)
        attempts[id] = Attempt(candidate: candidate, phase: .dialing, probe: probe)
        return .dial(id, candidate, path: intent.path, subprotocols: Self.subprotocols(preferring: preferredCipher))
    }

    /// Keeps `id`, closes every other attempt.
    mutating func choose(_ id: AttemptID) -> [Action] {
        chosen = id
        if case .handshaking(let m)? = attempts[id]?.phase {
            attempts[id]?.phase = .chosen
            live = m
        }
        liveClosing = attempts[id]?.closing ?? false
        var out: [Action] = []
        for other in attempts.keys.sorted() where other != id {
            attempts[other]?.probe = false
            out += close(other)
        }
        return out
    }

    mutating func close(_ id: AttemptID) -> [Action] {
        guard let a = attempts[id], !a.closing else { return [] }
        attempts[id]?.closing = true
        if id == chosen { liveClosing = true }
        return [.close(id)]
    }

    /// Most recent first; the oldest are forgotten, so a desktop that changes address often does not leave an
    /// ever longer list of dead addresses to dial. (The same rule as the shell's peers.json update.)
    mutating func remember(_ c: Candidate) {
        let hosts = ([c.host] + known.map(\.host)).uniquedInOrder()
        known = hosts.prefix(Self.rememberedAddresses)
            .map { Candidate(host: $0, port: c.port, source: "last known") }
    }
}
