import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeSupport

/// The `send` role as a value: events in, actions out. No socket, no file, no thread, no clock: every event
/// carries `now` (seconds on any monotonic scale), and `Sender` carries the actions out.
///
/// Flow:
/// 1. `start` dials (see `LinkCore`: every candidate at once, the first to prove the desktop's key wins).
/// 2. On each session: `resume`; the desktop's `delivered` drops what it has, `OutboxWindow` resends the rest in
///    order and keeps at most `maxInFlight` unacknowledged. Lines the shell journaled come in as `appended`. When no
///    chunk held can have gone out before (a run's first connection, usually), they go right behind the `resume`
///    without waiting for its answer, which then only acknowledges (the window is open already).
/// 3. Acks (and `delivered`) are journaled (`ackJournal`) and drop chunks. A `held` notice is reported once per
///    (sink, reason); the line stays journaled and the ack is still awaited, untimed until an ack moves or the
///    connection ends (step 4's ack timeout is for dead connections, and a desktop that says why it holds is not).
/// 4. A lost, refused or unreachable round is redialled after a backoff, on `tick` (`RedialSchedule`: 0.2 s, then
///    at most 0.3 s for `fastWindow` after the connection was lost or a line was read, doubling to 5 s after; each
///    delay ×0.75–1, jittered); a line read while waiting brings the redial forward to the fast cap. A
///    connection with no ack progress for `ackTimeout` is dropped and redialled.
/// 5. Done when the input ended and every chunk is acknowledged: `bye`, exit 0.
/// 6. Exit 75 when a chunk waited longer than the time limit (`Settings.timeout`, or `endedInputTimeout`
///    after the input ended), 77 at once after `refusalLimit` refused rounds in a row.
public struct ClientCore {
    public struct Settings: Sendable {
        public var desktopName: String
        public var agent: String
        /// See `SendOptions.timeout`: nil = the default rule, 0 = keep trying.
        public var timeout: Double?
        public var endedInputTimeout: Double
        public var refusalLimit: Int
        public var maxInFlight: Int
        public var ackTimeout: Double
        /// Seeds the redial jitter (so many devices that lost one desktop do not dial it in step).
        public var jitterSeed: UInt64
        /// The Noise cipher offered first (`LinkCore.preferredCipher`); nil: `LinkCore.defaultCipher`.
        public var cipher: NoiseCipher?

        public init(desktopName: String, agent: String = "speakbridge-cli/0.1", timeout: Double?,
                    endedInputTimeout: Double = ClientCore.defaultTimeout, refusalLimit: Int = ClientCore.refusalLimit,
                    maxInFlight: Int = OutboxWindow.defaultMaxInFlight, ackTimeout: Double = 15,
                    jitterSeed: UInt64 = .random(in: .min ... .max), cipher: NoiseCipher? = nil) {
            self.cipher = cipher
            self.desktopName = desktopName
            self.agent = agent
            self.timeout = timeout
            self.endedInputTimeout = endedInputTimeout
            self.refusalLimit = refusalLimit
            self.maxInFlight = maxInFlight
            self.ackTimeout = ackTimeout
            self.jitterSeed = jitterSeed
        }
    }

    public enum Event {
        case start
        /// mDNS found the desktop at these addresses.
        case found([Candidate])
        /// The connection of a `dial` opened.
        /// Its WebSocket is up; `subprotocol`: the one the desktop chose (it selects the Noise cipher).
        case connected(AttemptID, subprotocol: String?)
        case frame(AttemptID, [UInt8])
        /// A connection (or a dial that never opened) is gone.
        case closed(AttemptID, reason: String)
        /// Lines the shell journaled (sequence numbers ascending, above every earlier one). The shell itself uses
        /// `appended(moving:now:)` (the same, without copying the chunks) and, for a paced line, `appendedAlone`.
        case appended([Chunk])
        case inputEnded
        case tick
        /// The shell hit a fatal error (it reported it): exit with this code.
        case stop(Int32)
    }

    /// What the user is told (the shell renders it: a live line on a terminal, plain lines otherwise).
    public enum Report: Equatable, Sendable {
        case connected(String)
        case waiting(String)
        case info(String)
        case warning(String)
        case error(String, hint: String?)
        case progress(queued: Int, delivered: UInt64)
    }

    public enum Action: Equatable {
        case dial(AttemptID, Candidate, path: String, subprotocols: [String])
        case send(AttemptID, [UInt8])
        case close(AttemptID)
        /// Journal that the desktop has everything through this sequence number.
        case ackJournal(through: UInt64)
        case rememberAddress(Candidate)
        case report(Report)
        /// Make the journal durable (before an exit).
        case syncJournal
        case exit(Int32)
    }

    public static let defaultTimeout: Double = 30
    /// Consecutive dial rounds in which the desktop took the connection and message 1 but closed it without
    /// message 2 (no round reaching a session in between) before `send` decides the device was refused.
    public static let refusalLimit = 3
    /// At most this many distinct `held` notices are shown in one run (a desktop could vary the reason forever).
    static let maxHeldNotices = 32
    /// At most this many desktop `error` messages are shown in one run, then one line says the rest are not.
    static let maxErrorReports = 32

    public let settings: Settings
    public private(set) var link: LinkCore
    public private(set) var window: OutboxWindow
    /// Acknowledged before this run (for "acknowledged N line(s)").
    public let startAcked: UInt64
    public private(set) var exitCode: Int32?
    var inputDone = false
    var inputEndedAt: Double = 0
    /// Consecutive dial rounds refused by the desktop (see `refusalLimit`).
    var refusals = 0
    /// This connection's `resume` is out and its answer has not come: only that answer resends what is in flight.
    var awaitingResume = false
    var errorsReported = 0
    /// When each attempt sent message 1 (its WebSocket opened): one without an answer after
    /// `LinkCore.handshakeTimeout` is closed on the tick.
    var handshakeSince: [AttemptID: Double] = [:]
    var redial: RedialSchedule
    var redialAt: Double?
    var reportedUnreachable = false
    /// (last sequence number of a batch read together, when read), ascending: for the time limit.
    var waitingSince: [(seq: UInt64, at: Double)] = []
    var heldShown = Set<HeldKey>()
    /// The desktop said, on this connection, that a sink holds chunks of this session not yet acknowledged: no ack
    /// comes until the sink takes them, which says nothing about the connection, so `tick` does not redial for
    /// want of acks (a redial resent the whole window into the same hold every `ackTimeout`). Until an ack moves
    /// or the connection ends.
    var desktopHolds = false
    /// When this run started, and the time of the latest event.
    let startedAt: Double
    var lastNow: Double

    struct HeldKey: Hashable {
        var sink: String
        var reason: String
    }

    public init(settings: Settings, localStatic: X25519PrivateKey, desktopKey: X25519PublicKey, psk: SymmetricKey,
                known: [Candidate], extra: [Candidate], session: String, pending: [Chunk], acked: UInt64, now: Double) {
        self.settings = settings
        link = LinkCore(intent: .session, firstMessage: .hello(agent: settings.agent), localStatic: localStatic,
                        desktopKey: desktopKey, psk: psk, known: known, extra: extra, cipher: settings.cipher)
        window = OutboxWindow(session: session, pending: pending, acked: acked, maxInFlight: settings.maxInFlight,
                              ackTimeout: settings.ackTimeout)
        startAcked = acked
        redial = RedialSchedule(seed: settings.jitterSeed, now: now)
        startedAt = now
        lastNow = now
        // Chunks of an earlier run wait from the start.
        waitingSince = window.pending.last.map { [(seq: $0.seq, at: now)] } ?? []
    }

    /// Lines the desktop acknowledged in this run.
    public var acknowledgedThisRun: UInt64 { window.acked - min(window.acked, startAcked) }

    public mutating func handle(_ event: Event, now: Double) -> [Action] {
        lastNow = now
        switch event {
        case .start:
            return connect()
        case .found(let list):
            return linkActions(link.found(list), now: now)
        case .connected(let id, let subprotocol):
            let out = linkActions(link.opened(id, subprotocol: subprotocol), now: now)
            handshakeSince = handshakeSince.filter { link.handshaking.contains($0.key) }
            if link.handshaking.contains(id) { handshakeSince[id] = now }
            return out
        case .frame(let id, let bytes):
            return linkActions(link.frame(id, bytes), now: now)
        case .closed(let id, let reason):
            return linkActions(link.closed(id, reason: reason), now: now)
        case .appended(let chunks):
            var held = chunks
            return appended(moving: &held, now: now)
        case .inputEnded:
            inputDone = true
            inputEndedAt = now
            return checkDone()
        case .tick:
            return tick(now: now)
        case .stop(let code):
            return finish(code)
        }
    }

    /// `handle(.appended(chunks), now:)` taking the chunks out of `chunks` into the window (each element left an
    /// empty chunk) instead of copying them: the shell's array from `Outbox.append`, which nothing else holds.
    public mutating func appended(moving chunks: inout [Chunk], now: Double) -> [Action] {
        lastNow = now
        guard !chunks.isEmpty else { return [] }
        waitingSince.append((seq: chunks[chunks.count - 1].seq, at: now))
        // Someone is dictating: a desktop that is away is looked for at the fast pace again.
        redial.active(now: now)
        if let at = redialAt { redialAt = min(at, redial.soonest(now: now)) }
        let out = transmit(outgoing: window.appendOutgoing(moving: &chunks))
        let done = checkDone()
        return done.isEmpty ? out : out + done
    }

    /// What `appendedAlone` made of a paced line: its one frame (every line while the session is up: no array of
    /// actions is made for it; `.frame(id, f)` is exactly `.actions([.send(id, f)])`), or, when it could not be
    /// sealed, the actions that follow from that.
    public enum Alone {
        case frame(AttemptID, [UInt8])
        case actions([Action])
    }

    /// `handle(.appended([chunk]), now:)` for a paced line, without the general path's arrays, when the chunk
    /// goes out alone in one `chunk` message on the established session: connected and resumed, every earlier
    /// chunk already sent, room in the window, input not ended. The same state changes and the same actions.
    /// Nil when any of that does not hold: nothing has changed, and the caller uses `handle`.
    public mutating func appendedAlone(_ chunk: Chunk, now: Double) -> Alone? {
        guard exitCode == nil, !inputDone, window.sendsNextAlone, link.isEstablished, chunk.seq > window.lastSeq
        else { return nil }
        lastNow = now
        waitingSince.append((seq: chunk.seq, at: now))
        redial.active(now: now)
        if let at = redialAt { redialAt = min(at, redial.soonest(now: now)) }
        // Established: not nil.
        guard let (id, sealed) = link.seal(encoded: window.appendAloneEncoded(chunk)) else { return .actions([]) }
        switch sealed {
        case .frame(let frame):
            return .frame(id, frame)
        case .closed(let reason):
            // As `LinkCore.send` does when a message cannot be sealed: say so and close.
            return .actions(Self.io([.machineClosed(reason, chosen: true)] + link.close(id)))
        case .notReady:
            return .actions([])
        }
    }

    /// Seals message 1 of every connection being dialed (`LinkCore.prepareHandshakes`); the shell calls it right
    /// after carrying out `dial`s, so the handshake's first half is computed while the connections are made.
    public mutating func prepareHandshakes() { link.prepareHandshakes() }

    /// Closes every connection (the shell calls it once the `bye` had a moment to leave).
    public mutating func hangUp() -> [Action] { Self.io(link.hangUp()) }

    // MARK: - Connection

    mutating func connect() -> [Action] {
        guard exitCode == nil else { return [] }
        redialAt = nil
        return linkActions(link.connect(), now: lastNow)
    }

    /// Turns the link's outcomes into this role's behaviour.
    mutating func linkActions(_ actions: [LinkCore.Action], now: Double) -> [Action] {
        var out: [Action] = []
        for action in actions {
            guard exitCode == nil else { break }
            switch action {
            case .dial(let id, let c, let path, let offer): out.append(.dial(id, c, path: path, subprotocols: offer))
            case .send(let id, let bytes): out.append(.send(id, bytes))
            case .close(let id): out.append(.close(id))
            case .remember(let c): out.append(.rememberAddress(c))
            case .established(let c, let moved):
                if moved {
                    out.append(.report(.info("desktop \"\(settings.desktopName)\" moved to \(c); switching")))
                }
                // Also after a move: what was in flight goes again after `resume`.
                window.connectionLost()
                desktopHolds = false
                redial.reset()
                refusals = 0
                reportedUnreachable = false
                redialAt = nil
                out.append(.report(.connected(c.description)))
                awaitingResume = true
                out += transmit([.resume(session: window.session, delivered: nil)])
                // Chunks no connection carried yet go right behind it, without waiting for the answer (one round
                // trip less for a run's first line); the answer then only acknowledges.
                if window.sendsBeforeResumeAnswer { out += transmit(outgoing: window.resumeAheadOutgoing(now: now)) }
            case .received(let message):
                out += receive(message, now: now)
            case .lost(let reason):
                awaitingResume = false
                desktopHolds = false
                window.connectionLost()
                redial.active(now: now)
                out += scheduleReconnect("connection lost: \(reason)", now: now)
            case .machineClosed(let reason, let chosen):
                if chosen { out.append(.report(.warning("closing the connection: \(reason)"))) }
            case .handshakeClosed:
                break
            case .exhausted(let reason, let refused):
                refusals = refused ? refusals + 1 : 0
                if refusals >= settings.refusalLimit {
                    out += refusedExit()
                } else {
                    out += scheduleReconnect(refused ? "it did not accept this device" : reason, now: now)
                }
            case .paired:
                break
            }
        }
        return out
    }

    mutating func scheduleReconnect(_ reason: String, now: Double) -> [Action] {
        reportedUnreachable = true
        redialAt = now + redial.next(now: now)
        return [.report(.waiting(Self.shortReason(reason)))]
    }

    /// The desktop is reachable but refused the handshake `refusalLimit` times in a row: this device was revoked
    /// there (or the desktop at that address is another one). Retrying cannot help; the lines stay on disk but are
    /// not promised to anyone.
    mutating func refusedExit() -> [Action] {
        let kept = window.pendingCount
        let at = link.refusedBy.map { " at \($0)" } ?? ""
        let hint = "pair again with `speakbridge join CODE` (run `speakbridge pair` on the desktop for a code); "
            + "if another desktop now has that address, give the right one with --address HOST:PORT"
            + (kept > 0 ? "; the \(kept) queued line(s) are kept but not sent after a new pairing unless "
               + "you say so: see `speakbridge outbox`" : "")
        return [.report(.error("the desktop \"\(settings.desktopName)\"\(at) refused this device (revoked?)", hint: hint)),
                .syncJournal] + finish(77)
    }

    // MARK: - Session

    mutating func receive(_ message: Message, now: Double) -> [Action] {
        switch message {
        case let .resume(session, delivered) where session == window.session:
            // The answer to this connection's own `resume` resends the rest of the window. Any other is only an
            // ack: each one resent the whole window (up to 8 MiB), so a desktop that stopped reading and kept
            // sending `resume`s grew this process without bound.
            guard awaitingResume else { return acknowledge(delivered ?? 0, now: now, resume: false) + checkDone() }
            awaitingResume = false
            Trace.mark("resumed")
            // Opened ahead of the answer: what is in flight went out on this connection after the `resume`; nothing
            // to resend.
            var out = acknowledge(delivered ?? 0, now: now, resume: !window.isOpen)
            out += checkDone()
            return out
        case let .ack(session, seq) where session == window.session:
            return acknowledge(seq, now: now, resume: false) + checkDone()
        case .held(let notice):
            return receive(notice)
        case let .error(code, text, _):
            // A desktop may send them without end: the terminal or log gets a bounded number.
            errorsReported += 1
            if errorsReported > Self.maxErrorReports { return [] }
            if errorsReported == Self.maxErrorReports {
                return [.report(.warning("desktop reported \(code): \(text) (further errors of the desktop are not shown)"))]
            }
            return [.report(.warning("desktop reported \(code): \(text)"))]
        case .bye:
            return Self.io(link.drop())
        default:
            return []
        }
    }

    mutating func acknowledge(_ seq: UInt64, now: Double, resume: Bool) -> [Action] {
        let before = window.acked
        let outgoing = resume ? window.resumedOutgoing(delivered: seq, now: now) : window.ackOutgoing(seq, now: now)
        var out: [Action] = window.acked > before ? [.ackJournal(through: window.acked)] : []
        if window.acked > before { desktopHolds = false }
        // Nothing waits any more: what the tick would drop goes now (a `send` whose every line is acknowledged
        // before its tick has no tick to prune this list).
        if window.isDrained { waitingSince.removeAll(keepingCapacity: true) }
        out += transmit(outgoing: consume outgoing)
        return out
    }

    /// `held`: a sink on the desktop has not taken line `seq` of a session. Told once per (sink, reason); the line
    /// stays journaled and its ack is still awaited, but no longer timed (`desktopHolds`) while `seq` is not yet
    /// acknowledged.
    mutating func receive(_ held: HeldNotice) -> [Action] {
        if held.session == window.session, held.seq > window.acked { desktopHolds = true }
        guard held.session == window.session, heldShown.count < Self.maxHeldNotices,
              heldShown.insert(HeldKey(sink: held.sink, reason: held.reason)).inserted else { return [] }
        return [.report(.info(held.line))]
    }

    mutating func transmit(_ messages: [Message]) -> [Action] { Self.io(link.send(messages)) }

    /// `transmit` of what the window sends (its batches encoded: `OutboxWindow+Encoded.swift`).
    mutating func transmit(outgoing: consuming [OutboxWindow.Outgoing]) -> [Action] {
        Self.io(link.send(outgoing: consume outgoing))
    }

    /// The link's socket actions only (for commands whose outcomes come later as events), and why it closes a
    /// connection itself (a message it cannot seal).
    /// Static: an instance method called as `io(link.send(…))` gets a copy of the whole core as its receiver before
    /// the argument runs, so `link.send` found its tables shared and copied them (once per line).
    static func io(_ actions: [LinkCore.Action]) -> [Action] {
        // The usual case, a line's one frame, without compactMap's closure and growing array.
        if actions.count == 1, case .send(let id, let bytes) = actions[0] { return [.send(id, bytes)] }
        return actions.compactMap { action in
            switch action {
            case .dial(let id, let c, let path, let offer): .dial(id, c, path: path, subprotocols: offer)
            case .send(let id, let bytes): .send(id, bytes)
            case .close(let id): .close(id)
            case .machineClosed(let reason, chosen: true): .report(.warning("closing the connection: \(reason)"))
            default: nil
            }
        }
    }

    mutating func checkDone() -> [Action] {
        guard inputDone, window.isDrained, exitCode == nil else { return [] }
        return [.syncJournal] + transmit([.bye]) + finish(0)
    }

    mutating func finish(_ code: Int32) -> [Action] {
        guard exitCode == nil else { return [] }
        exitCode = code
        return [.exit(code)]
    }

    // MARK: - Timers

    mutating func tick(now: Double) -> [Action] {
        guard exitCode == nil else { return [] }
        var out: [Action] = []
        if let at = redialAt, now >= at { out += connect() }
        if !handshakeSince.isEmpty {
            for (id, since) in handshakeSince.sorted(by: { $0.key < $1.key })
            where now - since > LinkCore.handshakeTimeout {
                handshakeSince[id] = nil
                out += Self.io(link.abandonHandshake(id))
            }
        }
        if !desktopHolds, window.isStalled(now: now) {
            out.append(.report(.warning("no acknowledgement for \(Int(window.ackTimeout)) s; reconnecting")))
            out += Self.io(link.drop())
        }
        if let unacked = waitingSince.firstIndex(where: { $0.seq > window.acked }) {
            waitingSince.removeFirst(unacked)
        } else {
            waitingSince.removeAll()
        }
        if let limit = timeLimit(), let oldest = waitingSince.first, now - max(oldest.at, limit.from) > limit.seconds {
            let seconds = limit.seconds == limit.seconds.rounded() ? String(Int(limit.seconds)) : String(limit.seconds)
            out.append(.report(.error(
                "\(window.pendingCount) chunk(s) not acknowledged after \(seconds) s"
                    + (reportedUnreachable ? " (the desktop \"\(settings.desktopName)\" was not reachable)" : ""),
                hint: "they stay in the outbox and go out with the next `speakbridge send` "
                    + "(`speakbridge outbox` lists them; --timeout 0 keeps trying)")))
            return out + [.syncJournal] + finish(75)
        }
        out.append(.report(.progress(queued: window.pendingCount, delivered: acknowledgedThisRun)))
        return out
    }

    /// The timeout in force now and the earliest time it counts from (see `Settings.timeout`); nil = none.
    func timeLimit() -> (seconds: Double, from: Double)? {
        if let explicit = settings.timeout { return explicit > 0 ? (explicit, startedAt) : nil }
        return inputDone ? (settings.endedInputTimeout, inputEndedAt) : nil
    }

    /// The dialer's reasons ("addr: why; addr: why; …", one per failed attempt) without repeats, at most three.
    public static func shortReason(_ reason: String) -> String {
        // The plain loops (SpeakBridgeSupport/PlainText.swift): this runs on a first dial that fails.
        let parts = reason.splitPlain(separator: "; ").uniquedInOrder()
        guard !parts.isEmpty else { return "no answer" }
        return Array(parts.suffix(3)).joinedPlain(separator: "; ")
    }
}

extension HeldNotice {
    /// Longest sink name and reason shown (in Unicode scalars; longer ones are cut, with an ellipsis).
    static let shownSinkScalars = 64
    static let shownReasonScalars = 300

    /// What `send` tells the user (after `speakbridge: `): the desktop's strings escaped and cut.
    public var line: String {
        "desktop holds line \(seq) at \(PeerText.escape(sink, limit: Self.shownSinkScalars)): "
            + PeerText.escape(reason, limit: Self.shownReasonScalars)
    }
}
