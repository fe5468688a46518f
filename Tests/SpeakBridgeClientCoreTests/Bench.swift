import SpeakBridgeClientCore
import SpeakBridgeCrypto
import SpeakBridgeProtocol

/// `ClientCore` against a desktop in memory, byte for byte: every connection that opens gets a real
/// `ResponderMachine` (libsodium, the frames a daemon sends), the desktop keeps a ledger per session and acks
/// what it takes, and time is a manual clock. The one test double is the network: addresses are entries in
/// `addresses`, and a connection attempt opens, fails or hangs as the entry says.
final class Bench {
    enum Address {
        /// The paired desktop answers here.
        case live
        /// Connecting fails with this reason.
        case dead(String)
        /// Connecting hangs until the test fails it (`fail`).
        case hanging
        /// Another desktop (another key) answers here.
        case otherDesktop
        /// The WebSocket opens and nothing ever answers message 1 (a peer holding the handshake open).
        case silent
    }

    var core: ClientCore
    var now: Double = 0
    let desktopKey = X25519PrivateKey()
    let otherKey = X25519PrivateKey()
    let deviceKey = X25519PrivateKey()
    let psk = SymmetricKey.random()
    /// The desktop still knows this device (false: revoked there, its handshakes are refused).
    var paired = true
    var addresses: [String: Address] = [:]
    /// What the desktop has taken, in order, and its ledger (session → delivered).
    var received: [Chunk] = []
    var ledger: [String: UInt64] = [:]
    /// Ack what is taken at once (false: the test acks with `ackAll`).
    var autoAck = true
    /// The desktop's sinks take nothing (a held line): the ledger does not move.
    var holding = false
    var byes = 0
    /// Every chunk the desktop's machines decrypted, repeats included (what the client put on the wire).
    var chunksOnTheWire = 0
    /// The desktop's frames to an established client wait here (on their way) until `releaseAnswers`: what the
    /// client sends before it has any answer to its `resume`.
    var holdAnswers = false
    var heldAnswers: [ClientCore.Event] = []

    // What the core did.
    var reports: [ClientCore.Report] = []
    var journalAcked: UInt64 = 0
    var exitCode: Int32?
    var syncs = 0
    var remembered: [Candidate] = []
    var dialed: [Candidate] = []

    struct Connection {
        var candidate: Candidate
        var machine: ResponderMachine
    }

    var hanging: [AttemptID: Candidate] = [:]
    var silent: Set<AttemptID> = []
    var open: [AttemptID: Connection] = [:]
    var events: [ClientCore.Event] = []
    /// What the client wrote, in order: a frame, or its end (lws sends what was queued before closing).
    enum Wire {
        case frame(AttemptID, [UInt8])
        case close(AttemptID)
    }

    var toDesktop: [Wire] = []

    /// The cipher the client offers first; whether the desktop takes AESGCM when offered (else `speakbridge.v1`).
    let cipher: NoiseCipher
    var desktopTakesAESGCM = true
    /// The cipher of each connection the desktop opened, and what each dial offered.
    var ciphers: [AttemptID: NoiseCipher] = [:]
    var offers: [AttemptID: [String]] = [:]

    init(known: [String] = ["192.0.2.1"], extra: [String] = [], pending: [Chunk] = [], acked: UInt64 = 0,
         timeout: Double? = nil, maxInFlight: Int = 4_096, session: String = "s-bench", jitterSeed: UInt64 = 0,
         cipher: NoiseCipher = .chaChaPoly) {
        self.cipher = cipher
        core = ClientCore(settings: ClientCore.Settings(desktopName: "office", timeout: timeout,
                                                        maxInFlight: maxInFlight, jitterSeed: jitterSeed,
                                                        cipher: cipher),
                          localStatic: deviceKey, desktopKey: desktopKey.publicKey, psk: psk,
                          known: known.map { Candidate(host: $0, port: 7777, source: "last known") },
                          extra: extra.map { Candidate(host: $0, port: 7777, source: "--address") },
                          session: session, pending: pending, acked: acked, now: 0)
        for host in known + extra { addresses[host] = .live }
        journalAcked = acked
    }

    static func candidate(_ host: String) -> Candidate { Candidate(host: host, port: 7777, source: "test") }

    // MARK: - Driving

    /// Gives the core one event, then runs everything it caused until nothing moves.
    func send(_ event: ClientCore.Event) {
        events.append(event)
        pump()
    }

    func advance(to time: Double) {
        now = time
        send(.tick)
    }

    /// Ticks every 50 ms up to `time` (as the shell does).
    func run(until time: Double, step: Double = 0.05) {
        while now + step <= time + 1e-9, exitCode == nil { advance(to: now + step) }
    }

    func append(_ texts: [String]) {
        var chunks: [Chunk] = []
        var seq = core.window.lastSeq
        for text in texts {
            seq += 1
            chunks.append(Chunk(seq: seq, text: text))
        }
        send(.appended(chunks))
    }

    func pump() {
        while !events.isEmpty || !toDesktop.isEmpty {
            if !events.isEmpty {
                let event = events.removeFirst()
                perform(core.handle(event, now: now))
                continue
            }
            switch toDesktop.removeFirst() {
            case .frame(let id, let frame):
                guard var connection = open[id] else { continue }
                let actions = connection.machine.receive(frame)
                open[id] = connection
                desktop(actions, on: id)
            case .close(let id):
                if open.removeValue(forKey: id) != nil { events.append(.closed(id, reason: "local close 1000")) }
            }
        }
    }

    func perform(_ actions: [ClientCore.Action]) {
        for action in actions {
            switch action {
            case .dial(let id, let candidate, _, let offer):
                offers[id] = offer
                dialed.append(candidate)
                switch addresses[candidate.host] ?? .dead("no route to host") {
                case .live: connect(id, candidate, key: desktopKey)
                case .otherDesktop: connect(id, candidate, key: otherKey)
                case .dead(let reason): events.append(.closed(id, reason: "connect failed: \(reason)"))
                case .hanging: hanging[id] = candidate
                case .silent:
                    silent.insert(id)
                    events.append(.connected(id, subprotocol: offer.first))
                }
            case .send(let id, let frame):
                toDesktop.append(.frame(id, frame))
            case .close(let id):
                if hanging.removeValue(forKey: id) != nil || silent.remove(id) != nil {
                    events.append(.closed(id, reason: "local close 1000"))
                } else if open[id] != nil {
                    toDesktop.append(.close(id))
                }
            case .ackJournal(let seq):
                precondition(seq > journalAcked, "acks journaled out of order")
                journalAcked = seq
            case .rememberAddress(let c): remembered.append(c)
            case .report(let r): reports.append(r)
            case .syncJournal: syncs += 1
            case .exit(let code):
                precondition(exitCode == nil, "exit twice")
                exitCode = code
            }
        }
    }

    func connect(_ id: AttemptID, _ candidate: Candidate, key: X25519PrivateKey) {
        let context = ResponderContext(
            localStatic: key, localName: "office", pairingSecret: { nil },
            sessionPSK: { [unowned self] peer in
                paired && key.publicKey == desktopKey.publicKey && peer == deviceKey.publicKey ? psk : nil
            },
            delivered: { [unowned self] _, session in ledger[session] ?? 0 })
        // What a desktop's lws does with the dial's offer: the first subprotocol it accepts.
        let accepted = desktopTakesAESGCM ? ["speakbridge.v1", "speakbridge.v1.aesgcm"] : ["speakbridge.v1"]
        guard let name = offers[id]?.first(where: accepted.contains),
              let chosen = SpeakBridgeProtocol.cipher(forSubprotocol: name) else {
            events.append(.closed(id, reason: "HTTP 400"))
            return
        }
        ciphers[id] = chosen
        open[id] = Connection(candidate: candidate,
                              machine: ResponderMachine(intent: .session, context: context, cipher: chosen))
        events.append(.connected(id, subprotocol: name))
    }

    /// A hanging attempt fails now.
    func fail(_ host: String) {
        for (id, c) in hanging where c.host == host {
            hanging[id] = nil
            events.append(.closed(id, reason: "connect failed: timed out"))
        }
        pump()
    }

    /// The desktop side of a connection: what a daemon does with its responder's actions.
    func desktop(_ actions: [ResponderMachine.Action], on id: AttemptID) {
        for action in actions {
            switch action {
            case .send(let frame):
                if holdAnswers && core.link.isEstablished {
                    heldAnswers.append(.frame(id, frame))
                } else {
                    events.append(.frame(id, frame))
                }
            case .deliver(_, let session, let chunks):
                chunksOnTheWire += chunks.count
                if holding { continue }
                var delivered = ledger[session] ?? 0
                for chunk in chunks where chunk.seq == delivered + 1 {
                    received.append(chunk)
                    delivered = chunk.seq
                }
                ledger[session] = delivered
                if autoAck { ack(session, through: delivered, on: id) }
            case .close(let reason):
                if case .bye = reason { byes += 1 }
                if open.removeValue(forKey: id) != nil { events.append(.closed(id, reason: "peer close 1000")) }
            case .authenticated, .consumePairingCode, .pairingAttemptFailed, .pairingConfirmed, .config, .resumed:
                break
            }
        }
    }

    func ack(_ session: String, through seq: UInt64, on id: AttemptID) {
        guard var connection = open[id] else { return }
        let actions = connection.machine.acknowledge(session: session, through: seq)
        open[id] = connection
        desktop(actions, on: id)
    }

    /// The desktop's frames held on their way (`holdAnswers`) reach the client, in order; later ones go at once.
    func releaseAnswers() {
        holdAnswers = false
        events += heldAnswers
        heldAnswers.removeAll()
        pump()
    }

    /// The desktop acks everything it has on every open connection.
    func ackAll() {
        for (id, _) in open {
            for (session, seq) in ledger { ack(session, through: seq, on: id) }
        }
        pump()
    }

    /// The desktop sends a message of its own on every established connection (as a daemon would: encrypted by
    /// its responder). `.config(type:body:)` encodes any type: `{"type":T,…body}`.
    func desktopSends(_ message: Message) {
        for (id, var connection) in open where connection.machine.isEstablished {
            let actions = connection.machine.encryptAndSend(message)
            open[id] = connection
            desktop(actions, on: id)
        }
        pump()
    }

    /// The network drops every connection (both ends see it close).
    func dropAll(reason: String = "peer close 1006") {
        for id in open.keys.sorted() { events.append(.closed(id, reason: reason)) }
        open.removeAll()
        pump()
    }

    var established: Bool { core.link.isEstablished }
    var infos: [String] { reports.compactMap { if case .info(let t) = $0 { t } else { nil } } }
    var warnings: [String] { reports.compactMap { if case .warning(let t) = $0 { t } else { nil } } }
    var errors: [(String, String?)] { reports.compactMap { if case .error(let t, let h) = $0 { (t, h) } else { nil } } }
    var waits: [String] { reports.compactMap { if case .waiting(let t) = $0 { t } else { nil } } }
}
