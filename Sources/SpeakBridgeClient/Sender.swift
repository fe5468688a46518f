#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeWebSocket

public struct SendOptions: Sendable {
    public enum Source: Sendable { case stdin, texts([String]) }

    public var home: Home
    /// Which paired desktop (ID, ID prefix or name); nil = the only one.
    public var desktop: String?
    public var source: Source
    /// Give up (exit 75) once a chunk has waited this many seconds without being acknowledged (0 = keep
    /// trying). Measured per chunk from when it was read (or from the start, for chunks of an earlier run),
    /// so a long-running `send` on an open pipe is not cut off while the desktop keeps acknowledging.
    public var timeout: Double
    public var extraCandidates: [Candidate]

    public init(home: Home, desktop: String?, source: Source, timeout: Double, extraCandidates: [Candidate] = []) {
        self.home = home
        self.desktop = desktop
        self.source = source
        self.timeout = timeout
        self.extraCandidates = extraCandidates
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
        start = clock.now
    }

    /// Runs until everything is acknowledged (0), the timeout passes (75), or a fatal error (1).
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
        if !outbox.pending.isEmpty {
            Console.info("resending \(outbox.pending.count) unacknowledged chunk(s) from an earlier run")
        }
        switch options.source {
        case .texts(let texts):
            queue.async {
                self.accept(texts)
                self.inputDone = true
                self.checkDone()
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
            self.inputDone = true
            self.checkDone()
        }
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
            Console.error("cannot journal input: \(error.description)", hint: error.hint)
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
            if reportedUnreachable {
                Console.info("connected to \"\(desktop.name)\" at \(candidate)")
                reportedUnreachable = false
            }
            link.send([.resume(session: window.session, delivered: nil)])
        case .received(let message):
            receive(message)
        case .lost(let reason):
            window.connectionLost()
            scheduleReconnect("connection lost: \(reason)")
        case .unreachable(let reason, let refused):
            scheduleReconnect(refused ? "the desktop did not accept this device (revoked or not paired there?)" : reason)
        }
    }

    func scheduleReconnect(_ reason: String) {
        if !reportedUnreachable {
            reportedUnreachable = true
            Console.info("desktop \"\(desktop.name)\" not reachable (\(reason.isEmpty ? "no answer" : reason)); retrying")
        }
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
            Console.warning("desktop reported \(code): \(text)")
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
            Console.warning("cannot journal an ack: \(error.description)")
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
            Console.warning("no acknowledgement for \(Int(window.ackTimeout)) s; reconnecting")
            link.drop()
        }
        if let unacked = waitingSince.firstIndex(where: { $0.seq > window.acked }) {
            waitingSince.removeFirst(unacked)
        } else {
            waitingSince.removeAll()
        }
        if options.timeout > 0, let oldest = waitingSince.first, now - oldest.at > options.timeout {
            Console.error("\(window.pendingCount) chunk(s) not acknowledged after \(Int(options.timeout)) s",
                          hint: "they stay in the outbox and go out with the next `speakbridge send`")
            try? outbox.sync()
            finish(75)
            return
        }
        scheduleTick()
    }
}

extension ContinuousClock.Instant {
    func seconds(since start: ContinuousClock.Instant) -> Double {
        let d = self - start
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}
