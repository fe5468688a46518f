#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeWebSocket
import SpeakBridgeSupport

public struct SendOptions: Sendable {
    public enum Source: Sendable { case stdin, texts([String]) }

    public var home: Home
    /// Which paired desktop (ID, ID prefix or name); nil = the only one.
    public var desktop: String?
    public var source: Source
    /// Give up (exit 75) once a chunk has waited this many seconds without being acknowledged (0 = keep
    /// trying). Measured per chunk from when it was read (or from the start, for chunks of an earlier run),
    /// so a long-running `send` on an open pipe is not cut off while the desktop keeps acknowledging.
    /// nil = the default rule: keep waiting while the input can still bring lines (an open pipe or a terminal),
    /// and `defaultTimeout` seconds once it has ended (measured from the end of the input, or from when the
    /// chunk was read if later). So `--text`, a file or `/dev/null` give up after `defaultTimeout`.
    public var timeout: Double?
    public var extraCandidates: [Candidate]
    /// Off a terminal: seconds between `still waiting for the desktop` lines.
    public var stillWaitingInterval: Double
    /// The timeout of the default rule, once the input has ended (`defaultTimeout`; tests shorten it).
    public var endedInputTimeout: Double

    public static let defaultTimeout: Double = 30
    /// Consecutive dial rounds in which the desktop took the connection and message 1 but closed it without
    /// message 2 (no round reaching a session in between) before `send` decides the device was refused.
    public static let refusalLimit = 3

    public init(home: Home, desktop: String?, source: Source, timeout: Double?, extraCandidates: [Candidate] = [],
                stillWaitingInterval: Double = 30, endedInputTimeout: Double = SendOptions.defaultTimeout) {
        self.home = home
        self.desktop = desktop
        self.source = source
        self.timeout = timeout
        self.extraCandidates = extraCandidates
        self.stillWaitingInterval = stillWaitingInterval
        self.endedInputTimeout = endedInputTimeout
    }
}

/// `speakbridge send`: streams lines to a paired desktop, exactly once, in order.
///
/// Flow:
/// 1. Open the outbox journal for the desktop (unacknowledged chunks of earlier runs come back first).
/// 2. A reader thread turns stdin lines into chunks: journaled (write(2)) before they are sent.
/// 3. Dial the desktop's known addresses at once; Noise IKpsk1 with the per-pair psk; `resume` tells what the
///    desktop already has; `OutboxWindow` sends the rest in order and keeps at most N unacknowledged.
/// 4. Acks are journaled and drop chunks; a lost connection or a stalled one is redialled with backoff.
/// 5. Done when the input ended and every chunk is acknowledged: exit 0.
/// 6. Gives up with 75 on the timeout (see `SendOptions.timeout`), and with 77 at once when the desktop refuses
///    this device `refusalLimit` times in a row (it is reachable, takes message 1, never answers: revoked).
/// Progress goes to stderr through `SendStatus` (a live line on a terminal, plain lines otherwise).
public final class Sender: @unchecked Sendable {
    let options: SendOptions
    let identity: Identity
    let desktop: Peer
    let peers: PeerStore
    let outbox: Outbox
    let queue = DispatchQueue(label: "sb-send")
    let syncQueue = DispatchQueue(label: "sb-send-fsync")
    let finished = DispatchSemaphore(value: 0)
    var link: SessionLink!
    // Owned by `queue`.
    var window: OutboxWindow
    var inputDone = false
    var inputEndedAt: Double = 0
    /// Consecutive dial rounds refused by the desktop (see `SendOptions.refusalLimit`).
    var refusals = 0
    let startAcked: UInt64
    let status: SendStatus
    var exitCode: Int32?
    var backoff = 0.2
    var reportedUnreachable = false
    var needsSync = false
    /// (last sequence number of a batch read together, seconds since start when read), ascending: for `timeout`.
    /// One entry per read from stdin, not per chunk.
    var waitingSince: [(seq: UInt64, at: Double)] = []
    let clock = ContinuousClock()
    let start: ContinuousClock.Instant

    public init(options: SendOptions) throws(ClientError) {
        self.options = options
        (identity, peers) = try SessionLink.localState(options.home)
        desktop = try SessionLink.pairedDesktop(peers, options.desktop)
        do {
            outbox = try Outbox(home: options.home, desktop: desktop.id) {
                Console.info("another `speakbridge send` to this desktop is running; waiting for it to finish")
            }
        } catch {
            throw ClientError(error.description, hint: error.hint)
        }
        window = OutboxWindow(session: outbox.session, pending: outbox.pending, acked: outbox.acked)
        waitingSince = outbox.pending.last.map { [(seq: $0.seq, at: 0)] } ?? []
        startAcked = outbox.acked
        status = SendStatus(isTerminal: SendStatus.stderrIsTerminal, desktopName: desktop.name,
                            stillWaitingInterval: max(0.2, options.stillWaitingInterval))
        start = clock.now
    }

    /// Runs until everything is acknowledged (0), the timeout passes (75), the desktop refuses this device (77),
    /// or a fatal error (1).
    public func run() -> Int32 {
        do {
            link = try SessionLink(identity: identity, desktop: desktop, peers: peers, agent: "speakbridge-cli/0.1",
                                   extraCandidates: options.extraCandidates, queue: queue) { [weak self] event in
                self?.handle(event)
            }
        } catch {
            Console.error(error.message, hint: error.hint)
            return 1
        }
        link.notice = { [status] text, warning in warning ? status.warning(text) : status.info(text) }
        if !outbox.pending.isEmpty {
            Console.info("resending \(outbox.pending.count) unacknowledged chunk(s) from an earlier run")
        }
        let held = OutboxShelf.heldCount(home: options.home, desktop: desktop.id)
        if held > 0 {
            Console.info("\(held) line(s) from an earlier pairing with \"\(desktop.name)\" are held, not sent; "
                         + "`speakbridge outbox release` sends them, `speakbridge outbox clear --held` drops them")
        }
        switch options.source {
        case .texts(let texts):
            queue.async {
                self.accept(texts)
                self.endInput()
            }
        case .stdin:
            let reader = Thread { [self] in readStdin() }
            reader.name = "sb-stdin"
            reader.start()
        }
        queue.async { self.connect() }
        scheduleTick()
        finished.wait()
        link.shutdown()
        return queue.sync { exitCode ?? 1 }
    }

    // MARK: - Input

    func readStdin() {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var partial: [UInt8] = []
        while true {
            let n = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            partial += buffer[0..<n]
            guard let last = partial.lastIndex(of: 0x0A) else { continue }
            let lines = partial[..<last].split(separator: 0x0A, omittingEmptySubsequences: false).map(Self.text)
            partial.removeFirst(last + 1)
            // sync, not async: when the queue is idle the block runs right here, saving a thread wake-up per line.
            queue.sync { self.accept(lines) }
        }
        let rest = partial.isEmpty ? [] : [Self.text(partial[...])]
        queue.async {
            self.accept(rest)
            self.endInput()
        }
    }

    func endInput() {
        inputDone = true
        inputEndedAt = clock.now.seconds(since: start)
        checkDone()
    }

    static func text(_ bytes: ArraySlice<UInt8>) -> String {
        var line = bytes
        if line.last == 0x0D { line = line.dropLast() }  // CRLF input
        return String(decoding: line, as: UTF8.self)
    }

    /// Journals and queues texts; blank lines are skipped; over-long lines are split at the chunk limit.
    func accept(_ texts: [String]) {
        var pieces: [String] = []
        for text in texts where !text.isEmpty {
            var rest = Substring(text)
            while rest.utf8.count > SpeakBridgeProtocol.maxChunkTextBytes {
                var cut = rest.index(rest.startIndex, offsetBy: 0)
                var bytes = 0
                for (i, ch) in zip(rest.indices, rest) {
                    bytes += ch.utf8.count
                    if bytes > SpeakBridgeProtocol.maxChunkTextBytes { break }
                    cut = rest.index(after: i)
                }
                pieces.append(String(rest[..<cut]))
                rest = rest[cut...]
            }
            pieces.append(String(rest))
        }
        guard !pieces.isEmpty else { return }
        do {
            let chunks = try outbox.append(texts: pieces)
            let now = clock.now.seconds(since: start)
            if let last = chunks.last { waitingSince.append((seq: last.seq, at: now)) }
            needsSync = true
            transmit(window.append(contentsOf: chunks))
        } catch {
            status.error("cannot journal input: \(error.description)", hint: error.hint)
            finish(1)
        }
    }

    // MARK: - Connection

    func connect() {
        guard exitCode == nil else { return }
        link.connect()
    }

    func handle(_ event: SessionLink.Event) {
        guard exitCode == nil else { return }
        switch event {
        case .established(let candidate):
            // Also after the link moved to a new address: what was in flight goes again after `resume`.
            window.connectionLost()
            backoff = 0.2
            refusals = 0
            reportedUnreachable = false
            status.connected(candidate.description, now: clock.now.seconds(since: start))
            link.send([.resume(session: window.session, delivered: nil)])
        case .received(let message):
            receive(message)
        case .lost(let reason):
            window.connectionLost()
            scheduleReconnect("connection lost: \(reason)")
        case .unreachable(let reason, let refused):
            refusals = refused ? refusals + 1 : 0
            if refusals >= SendOptions.refusalLimit {
                refusedExit()
                return
            }
            scheduleReconnect(refused ? "it did not accept this device" : reason)
        }
    }

    /// The desktop is reachable but refused the handshake `refusalLimit` times in a row: this device was revoked
    /// there (or the desktop at that address is another one). Retrying cannot help; the lines stay on disk but are
    /// not promised to anyone.
    func refusedExit() {
        let kept = window.pendingCount
        let at = link.refusedBy.map { " at \($0)" } ?? ""
        status.error("the desktop \"\(desktop.name)\"\(at) refused this device (revoked?)",
                     hint: "pair again with `speakbridge join CODE` (run `speakbridge pair` on the desktop for a code); "
                        + "if another desktop now has that address, give the right one with --address HOST:PORT"
                        + (kept > 0 ? "; the \(kept) queued line(s) are kept but not sent after a new pairing unless "
                           + "you say so: see `speakbridge outbox`" : ""))
        try? outbox.sync()
        finish(77)
    }

    func scheduleReconnect(_ reason: String) {
        reportedUnreachable = true
        status.waiting(Self.shortReason(reason), now: clock.now.seconds(since: start))
        let delay = backoff
        backoff = min(backoff * 2, 5)
        queue.asyncAfter(deadline: .now() + delay) { self.connect() }
    }

    func receive(_ message: Message) {
        let now = clock.now.seconds(since: start)
        switch message {
        case let .resume(session, delivered) where session == window.session:
            let d = delivered ?? 0
            if d > window.acked { markAcked(d) }
            transmit(window.resumed(delivered: d, now: now))
            checkDone()
        case let .ack(session, seq) where session == window.session:
            markAcked(seq)
            transmit(window.ack(seq, now: now))
            checkDone()
        case let .error(code, text, _):
            status.warning("desktop reported \(code): \(text)")
        case .bye:
            link.drop()
        default:
            break
        }
    }

    func markAcked(_ seq: UInt64) {
        do {
            try outbox.markAcked(seq)
        } catch {
            // Not fatal: a lost ack record only means a resend that the desktop drops.
            status.warning("cannot journal an ack: \(error.description)")
        }
    }

    func transmit(_ messages: [Message]) {
        link.send(messages)
    }

    func checkDone() {
        guard inputDone, window.isDrained, exitCode == nil else { return }
        try? outbox.sync()
        transmit([.bye])
        finish(0)
    }

    func finish(_ code: Int32) {
        guard exitCode == nil else { return }
        exitCode = code
        status.erase()
        if code == 0 && status.isTerminal {
            Console.info("\"\(desktop.name)\" acknowledged \(window.acked - min(window.acked, startAcked)) line(s)")
        }
        // Give the bye frame a moment to leave before the context goes away.
        queue.asyncAfter(deadline: .now() + 0.05) {
            self.link.hangUp()
            self.finished.signal()
        }
    }

    // MARK: - Timers

    func scheduleTick() {
        queue.asyncAfter(deadline: .now() + 0.05) { [weak self] in self?.tick() }
    }

    func tick() {
        guard exitCode == nil else { return }
        if needsSync {
            needsSync = false
            // fsync off the queue: sending goes on while the disk catches up (the journal write already happened).
            let handle = outbox.syncHandle()
            if handle >= 0 {
                syncQueue.async {
                    fsync(handle)
                    close(handle)
                }
            }
        }
        let now = clock.now.seconds(since: start)
        if window.isStalled(now: now) {
            status.warning("no acknowledgement for \(Int(window.ackTimeout)) s; reconnecting")
            link.drop()
        }
        if let unacked = waitingSince.firstIndex(where: { $0.seq > window.acked }) {
            waitingSince.removeFirst(unacked)
        } else {
            waitingSince.removeAll()
        }
        if let limit = timeLimit(), let oldest = waitingSince.first, now - max(oldest.at, limit.from) > limit.seconds {
            status.error("\(window.pendingCount) chunk(s) not acknowledged after \(limit.seconds == limit.seconds.rounded() ? String(Int(limit.seconds)) : String(limit.seconds)) s"
                         + (reportedUnreachable ? " (the desktop \"\(desktop.name)\" was not reachable)" : ""),
                         hint: "they stay in the outbox and go out with the next `speakbridge send` "
                            + "(`speakbridge outbox` lists them; --timeout 0 keeps trying)")
            try? outbox.sync()
            finish(75)
            return
        }
        status.tick(now: now, queued: window.pendingCount, delivered: window.acked - min(window.acked, startAcked))
        scheduleTick()
    }
}

extension Sender {
    /// The dialer's reasons ("addr: why; addr: why; …", one per failed attempt) without repeats, at most three.
    static func shortReason(_ reason: String) -> String {
        var seen = Set<String>()
        let parts = reason.components(separatedBy: "; ").filter { !$0.isEmpty && seen.insert($0).inserted }
        guard !parts.isEmpty else { return "no answer" }
        return parts.suffix(3).joined(separator: "; ")
    }

    /// The timeout in force now and the earliest time it counts from (see `SendOptions.timeout`); nil = none.
    func timeLimit() -> (seconds: Double, from: Double)? {
        if let explicit = options.timeout { return explicit > 0 ? (explicit, 0) : nil }
        return inputDone ? (options.endedInputTimeout, inputEndedAt) : nil
    }
}

extension ContinuousClock.Instant {
    func seconds(since start: ContinuousClock.Instant) -> Double {
        let d = self - start
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}
