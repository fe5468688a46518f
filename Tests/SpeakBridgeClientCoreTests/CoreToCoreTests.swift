import SpeakBridgeClientCore
import SpeakBridgeCrypto
import SpeakBridgeDesktopCore
import SpeakBridgeProtocol
import Testing

/// Both roles in memory, byte for byte: `PairingCore` and `ClientCore` against `DesktopCore`, with a manual
/// clock. The doubles are at the edges the cores leave to their shells: the network (a queue of deliveries that
/// the test can cut), the sinks (a list, made durable when the test says) and peers.json (saved at once).
@Suite("ClientCore against DesktopCore, in memory")
struct CoreToCoreTests {
    struct NoBacklog: BacklogGauge {
        func isOverflowing(_ device: DeviceID) -> Bool { false }
        func isThrottled(_ device: DeviceID) -> Bool { false }
        func undelivered(_ device: DeviceID) -> BacklogMeter.Level { BacklogMeter.Level() }
    }

    final class World {
        static let epoch: Double = 1_700_000_000

        /// Pairs through a pairing code (desktop and `PairingCore` in this world), then makes the client that
        /// `send` would start with (not started yet). Returns the desktop's name as the pairing reported it.
        func pairClient(session: String, maxInFlight: Int = 64,
                        jitterSeed: UInt64 = .random(in: .min ... .max)) throws -> String {
            let secret = SymmetricKey.random()
            desktop(.pairingCodeIssued(secret, expiry: World.epoch + 600))
            var pairing = PairingCore(localStatic: deviceKey, desktopKey: deskKey.publicKey, secret: secret,
                                      name: "phone", candidates: [address], browsing: false)
            let first = pairing.start()
            self.pairing = pairing
            for case .dial(let id, _, let path, _) in first { dial(id, path: path) }
            pump()
            let (result, candidate) = try #require(paired)
            self.pairing = nil
            client = ClientCore(settings: .init(desktopName: result.desktopName, timeout: nil, maxInFlight: maxInFlight,
                                                jitterSeed: jitterSeed),
                                localStatic: deviceKey, desktopKey: result.desktopKey, psk: result.sessionKey,
                                known: [candidate], extra: [], session: session, pending: [], acked: 0, now: 0)
            return result.desktopName
        }
        let deskKey = X25519PrivateKey()
        let deviceKey = X25519PrivateKey()
        let address = Candidate(host: "192.0.2.5", port: 7777, source: "code")
        var desk: DesktopCore
        var pairing: PairingCore?
        var client: ClientCore?
        var now: Double = 0
        var work: [() -> Void] = []
        var lastConnection: UInt64 = 0
        var connectionOf: [AttemptID: ConnectionID] = [:]
        var attemptOf: [ConnectionID: AttemptID] = [:]
        /// What the sinks were given, in order, and what they still have to make durable.
        var written: [Chunk] = []
        var notDurable: [SessionLevel] = []
        var paired: (PairingResult, Candidate)?
        var pairingFailure: PairingCore.Failure?
        var exitCode: Int32?
        var journalAcked: UInt64 = 0
        var infos: [String] = []

        init() {
            desk = DesktopCore(configuration: .init(localStatic: deskKey, localName: "office", takesConfig: false),
                               clients: [], backlog: NoBacklog())
        }

        /// A world whose desktop has the phone paired already (no pairing round), and the phone's client for
        /// `session` (not started yet).
        static func paired(session: String) -> World {
            let world = World()
            let psk = SymmetricKey.random()
            world.desk = DesktopCore(configuration: .init(localStatic: world.deskKey, localName: "office", takesConfig: false),
                                     clients: [PairedClient(publicKey: world.deviceKey.publicKey, name: "phone", psk: psk)],
                                     backlog: NoBacklog())
            world.client = ClientCore(settings: .init(desktopName: "office", timeout: nil), localStatic: world.deviceKey,
                                      desktopKey: world.deskKey.publicKey, psk: psk, known: [world.address], extra: [],
                                      session: session, pending: [], acked: 0, now: 0)
            return world
        }

        func pump() {
            while !work.isEmpty { work.removeFirst()() }
        }

        // MARK: the desktop's shell

        func desktop(_ event: DesktopEvent) {
            let actions = desk.handle(event, now: Self.epoch + now)
            for action in actions {
                switch action {
                case let .send(cid, bytes):
                    guard let id = attemptOf[cid] else { continue }
                    work.append { self.clientFrame(id, bytes) }
                case let .close(cid, reason):
                    guard let id = attemptOf.removeValue(forKey: cid) else { continue }
                    connectionOf[id] = nil
                    work.append { self.clientClosed(id, "peer close \(reason.closeCode.code)") }
                case let .submit(_, device, session, chunks):
                    written += chunks
                    if let last = chunks.last { notDurable.append(SessionLevel(device: device, session: session, seq: last.seq)) }
                case let .persistPeer(cid, outcome, _, _, _):
                    work.append { self.desktop(.pairingSaved(cid, outcome)) }
                default:
                    break
                }
            }
        }

        /// The sinks made everything durable so far.
        func makeDurable() {
            let levels = notDurable
            notDurable = []
            if !levels.isEmpty { desktop(.durable(levels)) }
            pump()
        }

        // MARK: the network

        func dial(_ id: AttemptID, path: String) {
            lastConnection += 1
            let cid = ConnectionID(lastConnection)
            connectionOf[id] = cid
            attemptOf[cid] = id
            work.append {
                self.desktop(.connected(cid, path: path, remote: "192.0.2.100"))
                if self.connectionOf[id] != nil { self.clientOpened(id) }
            }
        }

        func clientSends(_ id: AttemptID, _ bytes: [UInt8]) {
            guard let cid = connectionOf[id] else { return }
            work.append { if self.attemptOf[cid] != nil { self.desktop(.frame(cid, bytes)) } }
        }

        func clientCloses(_ id: AttemptID) {
            guard let cid = connectionOf[id] else { return }
            work.append {
                guard self.attemptOf.removeValue(forKey: cid) != nil else { return }
                self.connectionOf[id] = nil
                self.desktop(.closed(cid))
                self.clientClosed(id, "local close 1000")
            }
        }

        /// The network drops every connection: both ends see it.
        func cut() {
            for (cid, id) in attemptOf.sorted(by: { $0.key < $1.key }) {
                attemptOf[cid] = nil
                connectionOf[id] = nil
                desktop(.closed(cid))
                clientClosed(id, "peer close 1006")
            }
            pump()
        }

        // MARK: the client's shell

        /// The desktop here speaks `speakbridge.v1` (its connections are `.native`: ChaChaPoly).
        func clientOpened(_ id: AttemptID) {
            step(pairing: { $0.opened(id, subprotocol: "speakbridge.v1") },
                 session: .connected(id, subprotocol: "speakbridge.v1"))
        }
        func clientFrame(_ id: AttemptID, _ b: [UInt8]) { step(pairing: { $0.frame(id, b) }, session: .frame(id, b)) }
        func clientClosed(_ id: AttemptID, _ r: String) { step(pairing: { $0.closed(id, reason: r) }, session: .closed(id, reason: r)) }

        func step(pairing body: (inout PairingCore) -> [PairingCore.Action], session event: ClientCore.Event) {
            if var core = pairing {
                let actions = body(&core)
                pairing = core
                for action in actions {
                    switch action {
                    case .dial(let id, _, let path, _): dial(id, path: path)
                    case .send(let id, let bytes): clientSends(id, bytes)
                    case .close(let id): clientCloses(id)
                    case .paired(let result, let c): paired = (result, c)
                    case .failed(let failure): pairingFailure = failure
                    }
                }
            } else {
                session(event)
            }
        }

        func session(_ event: ClientCore.Event) {
            guard var core = client else { return }
            let actions = core.handle(event, now: now)
            client = core
            for action in actions {
                switch action {
                case .dial(let id, _, let path, _): dial(id, path: path)
                case .send(let id, let bytes): clientSends(id, bytes)
                case .close(let id): clientCloses(id)
                case .ackJournal(let seq): journalAcked = seq
                case .exit(let code): exitCode = code
                case .report(.info(let text)): infos.append(text)
                case .rememberAddress, .report, .syncJournal: break
                }
            }
        }

        func send(_ event: ClientCore.Event) {
            session(event)
            pump()
        }

        func tick(to time: Double) {
            now = time
            desktop(.tick)
            send(.tick)
        }
    }

    @Test("pair, then 1,000 lines across 4 forced reconnects: each reaches the sinks exactly once, in order")
    func pairAndSendAcrossReconnects() throws {
        let world = World()
        #expect(try world.pairClient(session: "s-core-to-core") == "office")
        world.send(.start)
        #expect(world.client?.link.isEstablished == true)

        var seq: UInt64 = 0
        var cuts = 0
        while seq < 1_000 {
            let batch = (1...10).map { _ in
                seq += 1
                return Chunk(seq: seq, text: "line \(seq)")
            }
            world.send(.appended(batch))
            // The sinks finish most batches; at 250, 500 and 750 the connection breaks with lines written but
            // not yet durable (their acks never left), and after 600 with lines still unsent on the wire.
            if seq % 250 == 0 && seq < 1_000 || seq == 600 {
                world.cut()
                cuts += 1
                // At 500 the sinks finish only after the client is back: its resume learns a lower level, and
                // it sends again what the desktop has taken but not yet acknowledged.
                if seq != 500 { world.makeDurable() }
                world.tick(to: world.now + 0.3)
                #expect(world.client?.link.isEstablished == true)
                if seq == 500 { world.makeDurable() }
            } else if seq % 30 == 0 {
                world.makeDurable()
            }
        }
        world.send(.inputEnded)
        world.makeDurable()
        #expect(cuts == 4)
        #expect(world.exitCode == 0)
        #expect(world.journalAcked == 1_000)
        #expect(world.written.map(\.seq) == Array(1...1_000))
        #expect(world.written.map(\.text) == (1...1_000).map { "line \($0)" })
        let device = KeySchedule.deviceID(of: world.deviceKey.publicKey)
        #expect(world.desk.delivered(device, "s-core-to-core") == 1_000)
        #expect(world.desk.stats.duplicatesDropped > 0)  // the resend after 500 happened, and the ledger dropped it
    }

    @Test("a held sink on the desktop reaches the sender's user once, the line stays until it is taken")
    func heldThroughDesktopCore() throws {
        let world = World.paired(session: "s-held")
        world.send(.start)
        world.send(.appended([Chunk(seq: 1, text: "one")]))
        world.send(.inputEnded)
        let device = KeySchedule.deviceID(of: world.deviceKey.publicKey)
        let level = SessionLevel(device: device, session: "s-held", seq: 1)
        world.desktop(.sinkHeld(sink: "clipboard", reason: "no clipboard owner", [level]))
        world.pump()
        world.desktop(.sinkHeld(sink: "clipboard", reason: "no clipboard owner", [level]))
        world.pump()
        #expect(world.infos == ["desktop holds line 1 at clipboard: no clipboard owner"])
        #expect(world.exitCode == nil)
        world.makeDurable()
        #expect(world.exitCode == 0)
    }

    /// A connection that breaks during a hold: the new one's `resume` answer is followed by the standing `held`,
    /// so the client knows why no ack comes and does not redial every `ackTimeout` (before, `held` went out once
    /// per change only, and a client that reconnected mid-hold never heard of it again).
    @Test("a client that reconnects during a hold is told of it again after its resume, and waits without redialling")
    func heldRetoldAfterReconnect() throws {
        let world = World.paired(session: "s-held")
        world.send(.start)
        world.send(.appended([Chunk(seq: 1, text: "one")]))
        let device = KeySchedule.deviceID(of: world.deviceKey.publicKey)
        world.desktop(.sinkHeld(sink: "fifo:/tmp/f", reason: "no reader on FIFO", [SessionLevel(device: device, session: "s-held", seq: 1)]))
        world.pump()
        #expect(world.infos == ["desktop holds line 1 at fifo:/tmp/f: no reader on FIFO"])
        world.cut()
        var time = 0.0
        while time < 90 {
            time += 0.5
            world.tick(to: time)
        }
        #expect(world.client?.link.isEstablished == true)
        #expect(world.lastConnection == 2, "redialled \(world.lastConnection - 2) times during the hold")
        #expect(world.exitCode == nil)
        world.makeDurable()
        #expect(world.journalAcked == 1)
    }
}
