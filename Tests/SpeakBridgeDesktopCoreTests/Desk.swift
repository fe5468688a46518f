import SpeakBridgeCrypto
@testable import SpeakBridgeDesktopCore
@testable import SpeakBridgeProtocol
import Testing

/// The backlog the core looks up: a real `BacklogMeter` (one sink), which the test moves as a sink would.
final class MeterGauge: BacklogGauge {
    var meter: BacklogMeter
    init(limits: BacklogMeter.Limits = .desktop) { meter = BacklogMeter(sinks: 1, limits: limits) }
    func isOverflowing(_ device: DeviceID) -> Bool { meter.isOverflowing(device) }
    func isThrottled(_ device: DeviceID) -> Bool { meter.isThrottled(device) }
    func undelivered(_ device: DeviceID) -> BacklogMeter.Level { meter.undelivered(device) }
}

/// A desktop core driven in memory with a manual clock. It carries out the actions the way the daemon does, except
/// at the one boundary that is not crossed here: the delivery pipeline (sinks, progress log, fsync) is the real
/// `BacklogMeter` above plus a record of what was submitted; the test says when a sink took chunks and when they
/// are durable.
struct Desk {
    static let key = X25519PrivateKey()
    var core: DesktopCore
    let gauge: MeterGauge
    var now: Double = 1_700_000_000
    var frames: [ConnectionID: [[UInt8]]] = [:]
    var closes: [ConnectionID: CloseReason] = [:]
    var submitted: [(device: DeviceID, session: String, chunks: [Chunk])] = []
    var pausedReading: [ConnectionID] = []
    var resumedReading: [ConnectionID] = []
    var authenticated: [ConnectionID] = []
    var persisted: [(ConnectionID, PairingOutcome, String, DeviceKind, String?)] = []
    var touched: [X25519PublicKey] = []
    var configAsks: [DesktopAction] = []
    var retired: [(DeviceID, SessionLedger.Retirement)] = []
    var forgotten: [DeviceID] = []
    var logs: [LogLine] = []
    var nextID: UInt64 = 1

    init(clients: [PairedClient] = [], takesConfig: Bool = false, limits: BacklogMeter.Limits = .desktop) {
        gauge = MeterGauge(limits: limits)
        core = DesktopCore(configuration: .init(localStatic: Self.key, localName: "desk", takesConfig: takesConfig),
                           clients: clients, backlog: gauge)
    }

    static var publicKey: X25519PublicKey { key.publicKey }

    mutating func newConnection() -> ConnectionID {
        defer { nextID += 1 }
        return ConnectionID(nextID)
    }

    mutating func run(_ event: DesktopEvent) {
        perform(core.handle(event, now: now))
    }

    mutating func perform(_ actions: [DesktopAction]) {
        for action in actions {
            switch action {
            case let .send(id, frame): frames[id, default: []].append(frame)
            case let .close(id, reason): closes[id] = reason
            case .markAuthenticated(let id, _): authenticated.append(id)
            case .pauseReading(let id): pausedReading.append(id)
            case .resumeReading(let id): resumedReading.append(id)
            case let .submit(id, device, session, chunks):
                submitted.append((device, session, chunks))
                let bytes = chunks.reduce(UInt64(0)) { $0 + UInt64($1.text.utf8.count) }
                if gauge.meter.submit(device, chunks: UInt64(chunks.count), bytes: bytes) == .pause {
                    run(.pressure(id, device, .pause))
                }
            case let .retire(device, r): retired.append((device, r))
            case .forgetDelivery(let device): forgotten.append(device)
            case let .persistPeer(id, outcome, name, kind, agent): persisted.append((id, outcome, name, kind, agent))
            case .touchPeer(let key): touched.append(key)
            case .configOpened, .configRequest: configAsks.append(action)
            case .log(let line): logs.append(line)
            }
        }
    }

    /// Frames sent on `id` since the last call.
    mutating func take(_ id: ConnectionID) -> [[UInt8]] {
        defer { frames[id] = [] }
        return frames[id] ?? []
    }

    /// A sink took `count` chunks (`bytes` of text) of `device`: the meter moves; drained devices are reported.
    mutating func sinkTook(_ device: DeviceID, chunks: UInt64, bytes: UInt64) {
        if gauge.meter.taken(device, sink: 0, chunks: chunks, bytes: bytes) { run(.drained([device])) }
    }

    /// `kind` `browser`: a `pair --web` code.
    mutating func issueCode(lifetime: Double = 120, kind: DeviceKind = .native) -> SymmetricKey {
        let secret = SymmetricKey.random()
        run(.pairingCodeIssued(secret, expiry: now + lifetime, kind: kind))
        return secret
    }
}

/// A capture device: a real `InitiatorMachine` (libsodium) talking to the core byte for byte.
struct Phone {
    let key = X25519PrivateKey()
    var psk: SymmetricKey?
    var id: DeviceID { KeySchedule.deviceID(of: key.publicKey) }
    var client: PairedClient { PairedClient(publicKey: key.publicKey, name: "phone", psk: psk!) }

    static func paired(name: String = "phone") -> Phone {
        var phone = Phone()
        phone.psk = SymmetricKey.random()
        return phone
    }

    static func sends(_ actions: [InitiatorMachine.Action]) -> [[UInt8]] {
        actions.compactMap { if case .send(let f) = $0 { return f } else { return nil } }
    }

    /// Pairing up to the confirmation: returns the machine waiting for `paired` and the connection.
    func startPairing(_ desk: inout Desk, secret: SymmetricKey, name: String = "phone",
                      route: ConnectionRoute = .native) throws -> (InitiatorMachine, ConnectionID) {
        let c = desk.newConnection()
        desk.run(.connected(c, path: SpeakBridgeProtocol.pairPath, remote: "127.0.0.1", route: route))
        var machine = try InitiatorMachine(intent: .pair, localStatic: key, desktopKey: Desk.publicKey, psk: secret,
                                           firstMessage: .pair(name: name))
        desk.run(.frame(c, try machine.start()))
        for frame in desk.take(c) {
            for confirm in Self.sends(machine.receive(frame)) { desk.run(.frame(c, confirm)) }
        }
        return (machine, c)
    }

    /// A session: message 1, message 2, then `first` as the first transport message (the desktop authenticates
    /// the connection on it). Returns the machine and the connection.
    func open(_ desk: inout Desk, first: Message = .resume(session: "s", delivered: nil)) throws
        -> (Session) {
        let c = desk.newConnection()
        desk.run(.connected(c, path: SpeakBridgeProtocol.sessionPath, remote: "127.0.0.1"))
        var machine = try InitiatorMachine(intent: .session, localStatic: key, desktopKey: Desk.publicKey,
                                           psk: try #require(psk), firstMessage: .hello(agent: "test"))
        desk.run(.frame(c, try machine.start()))
        var session = Session(machine: machine, id: c)
        for frame in desk.take(c) { _ = session.machine.receive(frame) }
        machine = session.machine
        #expect(machine.isEstablished)
        session.send(first, to: &desk)
        return session
    }
}

/// One established connection of a phone.
struct Session {
    var machine: InitiatorMachine
    let id: ConnectionID

    mutating func send(_ message: Message, to desk: inout Desk) {
        for frame in Phone.sends(machine.encryptAndSend(message)) { desk.run(.frame(id, frame)) }
    }

    /// Encrypts raw plaintext (a message the codec would never produce) and sends it.
    mutating func sendRaw(_ plaintext: String, to desk: inout Desk) throws {
        guard case .established = machine.state,
              let frame = try machine.session?.encrypt(Array(plaintext.utf8)) else { throw SessionError.notEstablished }
        desk.run(.frame(id, frame))
    }

    /// What the desktop sent this connection since the last call, decrypted.
    mutating func received(from desk: inout Desk) -> [Message] {
        desk.take(id).flatMap { frame in
            machine.receive(frame).compactMap { if case .received(let m) = $0 { return m } else { return nil } }
        }
    }

    enum SessionError: Error { case notEstablished }
}
