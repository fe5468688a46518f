#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import FoundationEssentials
import SpeakBridgeClientCore
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

    public static let defaultTimeout: Double = ClientCore.defaultTimeout

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
/// A shell around `ClientCore`, which decides everything about the desktop (dialing, handshake, resume, the
/// outbox window, acks, refusals, timeouts, exit codes). This carries its actions out and feeds it events:
/// 1. Start the socket thread (it creates its context meanwhile), read the identity, peers.json and the outbox
///    journal for the desktop (unacknowledged chunks of earlier runs come back first).
/// 2. Dial at once, on this thread; message 1 of each attempt is sealed while it connects (`prepareHandshakes`).
///    Notices (resending, held lines) come after the dial. Start-up stages are trace marks (`Tests/bench/stages.py`).
/// 3. Stdin lines become chunks, journaled (write(2)) before the core sees them (`appended`; a line alone takes
///    `appendedAlone`, the same without the general path's arrays, when it goes out alone). A pipe, FIFO, socket
///    or terminal is read on the socket thread as it polls readable, so a line's frame is written in the same loop
///    iteration with no thread woken; a regular file by a reader thread (`readStdin`). Input the journal cannot take
///    (a full disk) is held in memory and stdin is read no more until it can (Sender+InputHold.swift).
/// 4. Sockets and mDNS through `LinkDriver`; acks journaled on the tick or with the next line's record (`ackJournal`,
///    latest only); a journal write is fsynced (on a thread of its own, `JournalSyncer`) only when the desktop has
///    not acknowledged it within 50 ms (Sender+Clock.swift). While lines keep coming, acks are read with the next
///    line, not as they come (Sender+LazyAcks.swift).
/// 5. A tick every 50 ms gives the core the time (redials, stalls, the time limit, the status line), timed by the
///    socket thread's loop and run there (`LinkDriver.schedule`); it stops while there is nothing to time
///    (`isQuiet`) and starts again with the next event.
/// 6. `exit`: the status line goes, the bye has until the desktop closes the connection (50 ms at most) to leave,
///    then every connection closes; a drained journal is cut back to its header (`Outbox.resetIfDrained`).
/// Progress goes to stderr through `SendStatus` (a live line on a terminal, plain lines otherwise).
///
/// `@unchecked Sendable`: `core`, `status`, `needsSync`, `owed`, `journalDirty`, `journalFailure`, `lastJournalRewriteAt`, `exitOverride`, `inputHold`, `tickAt`, `lazyOn`, `lastLineAt`, `lastAckLookAt`, `ackToJournal`, `lastFrameFrom`, `finishing`
/// and `completed` are used on `queue` only (driver events, stdin lines and the tick through `queue.sync`, the end
/// through `asyncAfter`; `run` reads the exit code through `queue.sync`); `driver` and `tickWork` are set in `run` before anything is queued;
/// everything else (`launched` too) is immutable.
public final class Sender: @unchecked Sendable {
    let options: SendOptions
    let identity: Identity
    let desktop: Peer
    let peers: PeerStore
    let outbox: Outbox
    let queue: LockedQueue
    let syncQueue = DispatchQueue(label: "sb-send-fsync")
    /// The journal's fsyncs, on a thread of their own (`JournalSyncer`).
    let syncer = JournalSyncer()
    let finished = DispatchSemaphore(value: 0)
    var driver: LinkDriver!
    /// The tick as the socket thread runs it (`LinkDriver.onQueue`), made once in `run`: arming it for each line
    /// allocates nothing.
    var tickWork: (@Sendable () -> Void)!
    /// The driver, started in `init` (its context is being created meanwhile); `run` makes it `driver`.
    let launched: Result<LinkDriver, any Error>
    // Owned by `queue`.
    var core: ClientCore
    let status: SendStatus
    /// A journal write is owed durability: neither fsynced nor acknowledged yet (Sender+Clock.swift), or the
    /// journal must be rewritten (Sender+JournalFailure.swift).
    var needsSync = false
    /// Journal writes neither fsynced nor acknowledged: (last sequence number written, when), ascending; each must
    /// be one or the other within `durableWithin` of its time (Sender+Clock.swift).
    var owed: [(seq: UInt64, at: Double)] = []
    /// The journal was written (a chunk or an ack record) since the last fsync was handed over or made: the end of the
    /// run syncs it (`syncJournalAtEnd`).
    var journalDirty = false
    /// When the scheduled tick fires (`now`; `scheduleTick`, `scheduleLazyTick`); nil while quiet (`isQuiet`).
    var tickAt: Double?
    var ticking: Bool { tickAt != nil }
    /// The connection whose acks are read lazily, between lines (`Sender+LazyAcks.swift`); nil: read as they come.
    var lazyOn: AttemptID?
    /// When the last line was sent (`now`), and when a line last looked for waiting acks.
    var lastLineAt = -Double.infinity
    var lastAckLookAt = -Double.infinity
    /// The highest ack not journaled yet (`journalAck`).
    var ackToJournal: UInt64 = 0
    /// A desktop address peers.json should record (`rememberHeldAddress`), held until the first ack.
    var addressToRemember: Candidate?
    /// The connection the last desktop frame came on (the one that carries the `bye`); set while finishing.
    var lastFrameFrom: AttemptID?
    var finishing = false
    var completed = false
    /// A journal sync failed and no rewrite has succeeded since (Sender+JournalFailure.swift): nil on the fast path.
    var journalFailure: StoreError?
    var lastJournalRewriteAt = -Double.infinity
    /// Replaces the core's exit code (74: unacknowledged lines in a journal that could not be synced).
    var exitOverride: Int32?
    /// Input read but not journaled while the journal cannot take it, and the hold's state (Sender+InputHold.swift):
    /// nil on the fast path.
    var inputHold: InputHold?
    /// The journal is looked at for a compaction while running once its records pass this size (Sender+Clock.swift,
    /// `compactLongJournal`): 8 MiB at first; after a compaction, 4 MiB beyond what it left (at least 8 MiB); after a
    /// look that found too little to drop, when that much more is written; after a failure, 8 MiB later.
    var compactJournalAbove = Sender.compactRunningAbove
    /// The same with every line acknowledged: 8 MiB, or 8 MiB past a failed compaction.
    var compactDrainedAbove = Sender.compactRunningAbove
    /// The ack level at the last compaction (the journal's at the start before any): records of lines through it
    /// are gone (a journal is compacted on open once it is large).
    var compactedAtAck: UInt64 = 0
    /// When the run began, on `BootClock` (ContinuousClock's clock on Linux: it counts through a suspend).
    let start: UInt64

    public init(options: SendOptions) throws(ClientError) {
        self.options = options
        // The socket thread creates its libwebsockets context while this one reads the identity, peers.json and the
        // journal (`run` waits for it before the first dial).
        let queue = LockedQueue(label: "sb-send")
        self.queue = queue
        launched = Result { try LinkDriver(queue: queue, waitForContext: false) }
        (identity, peers) = try SessionLink.localState(options.home)
        desktop = try SessionLink.pairedDesktop(peers, options.desktop)
        Trace.mark("loaded")
        do {
            outbox = try Outbox(home: options.home, desktop: desktop.id) {
                Console.info("another `speakbridge send` to this desktop is running; waiting for it to finish")
            }
        } catch {
            throw ClientError(error.description, hint: error.hint)
        }
        Trace.mark("outbox")
        core = ClientCore(settings: ClientCore.Settings(desktopName: desktop.name, timeout: options.timeout,
                                                        endedInputTimeout: options.endedInputTimeout),
                          localStatic: identity.privateKey, desktopKey: desktop.publicKey, psk: desktop.psk,
                          known: SessionLink.known(desktop), extra: options.extraCandidates,
                          session: outbox.session, pending: outbox.pending, acked: outbox.acked, now: 0)
        compactedAtAck = outbox.acked
        status = SendStatus(isTerminal: SendStatus.stderrIsTerminal, desktopName: desktop.name,
                            stillWaitingInterval: max(0.2, options.stillWaitingInterval))
        start = BootClock.nanoseconds
    }

    /// Runs until everything is acknowledged (0), the timeout passes (75), the desktop refuses this device (77),
    /// or a fatal error (1); 74 instead when lines are left unacknowledged in a journal that could not be synced
    /// (Sender+JournalFailure.swift).
    public func run() -> Int32 {
        do {
            driver = try launched.get()
            tickWork = driver.onQueue { [weak self] in self?.tick() }
            // A failed journal sync comes back to `queue`, which rewrites the journal (Sender+JournalFailure.swift).
            syncer.onFailure = { [weak self] log, error in
                guard let sender = self else { return }
                sender.queue.async { sender.journalSyncFailed(log, error) }
            }
            try driver.ready()
        } catch {
            Console.error("cannot start the WebSocket client: \(error)")
            return 1
        }
        Trace.mark("wsctx")
        driver.onEvent = { [weak self] event in self?.handle(event) }
        // Dial first, right here: the queue is idle, so `sync` runs the block on this thread (no hop to a dispatch
        // worker, which the first `async` would have to start). The connection is under way while the rest starts.
        queue.sync {
            apply(.start)  // dials; starts the clock (`apply`)
            driver.findDesktop(desktop.id)
            if !outbox.pending.isEmpty {
                status.info("resending \(outbox.pending.count) unacknowledged chunk(s) from an earlier run")
            }
        }
        // Held lines of an earlier pairing: a notice only, read off the queue (it lists and parses every journal),
        // and only when a held journal of this desktop is there by its name: else the count is 0, and neither a
        // dispatch worker nor the parse of the live journal competes with the handshake for the CPU.
        if OutboxShelf.mayHoldLines(home: options.home, desktop: desktop.id) {
            syncQueue.async { [self] in
                let held = OutboxShelf.heldCount(home: options.home, desktop: desktop.id)
                guard held > 0 else { return }
                queue.async { [self] in
                    status.info("\(held) line(s) from an earlier pairing with \"\(desktop.name)\" are held, not sent; "
                                + "`speakbridge outbox release` sends them, `speakbridge outbox clear --held` drops them")
                }
            }
        }
        switch options.source {
        case .texts(let texts):
            // On this thread, as the dial above (`sync` on an idle queue runs here): an `async` started a dispatch
            // worker for it while the connection was being made. Nothing in it waits on the queue (the end is
            // `asyncAfter`), and this thread has nothing else to do but wait for the end.
            queue.sync {
                accept(texts)
                endInput()
            }
        case .stdin:
            readStdin()
        }
        finished.wait()
        driver.shutdown()
        return queue.sync { exitOverride ?? core.exitCode ?? 1 }
    }

    // MARK: - Input

    /// A pipe, FIFO, socket or terminal on stdin is read on the socket thread when it polls readable (one read
    /// per wake-up): the lines are journaled and sealed there, and their frame goes out in the same loop iteration,
    /// with no thread woken in between. Anything else (a regular file, which always polls readable) is read by a
    /// thread of its own, `sb-stdin`.
    ///
    /// While input cannot be journaled (Sender+InputHold.swift) the reading stops: the watch ends, or the thread
    /// waits, and the hold's end starts it again (`resume`), with the same reader (a partial line stays in it).
    func readStdin() {
        let input = LineReader(fd: 0)
        if watchStdin(input) { return }
        Threads.start(name: "sb-stdin") { [self] in
            let resumed = DispatchSemaphore(value: 0)
            let resume: @Sendable () -> Void = { resumed.signal() }
            var ended = false
            while !ended {
                let step = input.readOnce(eagainEnds: true)  // as before: a blocking read; EAGAIN ends it
                ended = step.ended
                if !deliver(step, resume: resume) && !ended { resumed.wait() }
            }
        }
    }

    /// Watches stdin on the socket thread (true), or says that it cannot be watched (a regular file).
    func watchStdin(_ input: LineReader) -> Bool {
        // Held: the watch ends, and a thread of the hold's end watches again (`watchReadable` from a thread that is
        // not the socket thread waits for it, which the queue must not). Made once, not per line.
        let resume: @Sendable () -> Void = { [self] in Threads.start(name: "sb-stdin-resume") { _ = self.watchStdin(input) } }
        let watched = driver.watchReadable(fd: 0) { [self] hungUp in
            guard hungUp else {
                let step = input.readOnce()
                let more = deliver(step, resume: resume)
                return !step.ended && more
            }
            // lws closed its copy after a hang-up: what is left is read now (no read blocks on a hung-up pipe, and
            // what a pipe holds is bounded, so a hold keeps it all).
            var step = LineReader.Step(lines: InputBatch(), ended: false)
            while !step.ended {
                step = input.readOnce(eagainEnds: true)
                _ = deliver(step, resume: resume)  // never called: the end comes with these reads
            }
            return false
        }
        return watched != nil
    }

    /// Hands what one read brought to `queue`. sync, not async: when the queue is idle the block runs right here
    /// (on the reading thread), saving a thread wake-up per line. False: the input is held (it could not be
    /// journaled), read no more; `resume` is called when it may go on.
    func deliver(_ step: LineReader.Step, resume: @escaping @Sendable () -> Void) -> Bool {
        guard step.ended || !step.lines.isEmpty else { return true }
        return queue.sync {
            if inputHold == nil { accept(step.lines) } else if !step.lines.isEmpty { inputHold?.batches.append(step.lines) }
            guard inputHold != nil else {
                if step.ended { endInput() }
                return true
            }
            inputHold?.stopReading(ended: step.ended, at: now, resume: resume)  // also when this read started it
            return false
        }
    }

    func endInput() {
        readAcksNow()  // the last acks are what the end waits for
        apply(.inputEnded)
    }

    /// Journals and queues what one read brought: plain lines straight from their bytes (no `String` made for a
    /// line: journal record, chunk and frame are written from them), any other batch as texts.
    /// A batch that cannot be journaled (a full disk) is held, with the input (Sender+InputHold.swift).
    func accept(_ batch: InputBatch) {
        do throws(StoreError) { try journalAndQueue(batch) } catch { inputHoldStarted(batch, error) }
    }

    func journalAndQueue(_ batch: InputBatch) throws(StoreError) {
        guard let plain = batch.plainLines else {
            try journalAndQueue(batch.texts)
            return
        }
        if plain.ranges.count == 1 {
            try acceptAlone { ack throws(StoreError) in try outbox.append(line: plain, ack: ack) }
        } else {
            try acceptBatch { ack throws(StoreError) in try outbox.append(lines: plain, ack: ack) }
        }
    }

    /// `--text`: the texts are still the caller's, so one that cannot be journaled ends the run (exit 74) with
    /// nothing sent, rather than waiting for room.
    func accept(_ texts: [String]) {
        do throws(StoreError) { try journalAndQueue(texts) } catch {
            status.error("cannot journal the text: \(error.description); nothing of it was sent",
                         hint: "free some disk space and run the command again")
            apply(.stop(Self.exitIOError))
        }
    }

    /// Journals and queues texts (see `InputLines.pieces`: blank lines skipped, over-long lines split); throws,
    /// with nothing journaled or queued, when the journal cannot take them.
    func journalAndQueue(_ texts: [String]) throws(StoreError) {
        let pieces = InputLines.pieces(texts)
        guard !pieces.isEmpty else { return }
        if pieces.count == 1 {
            try acceptAlone { ack throws(StoreError) in try outbox.append(text: pieces[0], ack: ack) }
        } else {
            try acceptBatch { ack throws(StoreError) in try outbox.append(texts: pieces, ack: ack) }
        }
    }

    /// Queues the chunks `journal` made (at least two) of what it journaled with the pending ack's record.
    func acceptBatch(_ journal: (UInt64) throws(StoreError) -> [Chunk]) throws(StoreError) {
        var chunks = try journal(ackToJournal)  // the pending ack record rides along
        let last = chunks[chunks.count - 1].seq  // one chunk a piece, and there are pieces
        Trace.mark("journal", last)
        let at = now
        // `apply(.appended(chunks))` without copying the chunks into the window: this array is theirs only.
        performAndClock(core.appended(moving: &chunks, now: at))
        owe(last, at: at)  // after the frame is queued
        lineSent(at: at)
    }

    /// `acceptBatch` for one piece (a paced line): journaled the same way, then the core's path without arrays
    /// (`ClientCore.appendedAlone`) when the line goes out alone, else `.appended` as for any batch.
    func acceptAlone(_ journal: (UInt64) throws(StoreError) -> Chunk) throws(StoreError) {
        let chunk = try journal(ackToJournal)  // the pending ack record rides along
        Trace.mark("journal", chunk.seq)
        let at = now
        switch core.appendedAlone(chunk, now: at) {
        case .frame(let id, let frame)?:
            send(frame, on: id)
        case .actions(let actions)?:
            perform(actions)
        case nil:
            apply(.appended([chunk]))
        }
        owe(chunk.seq, at: at)  // after the frame is queued; arms the tick (by the write's deadline)
        lineSent(at: at)
    }

    // MARK: - Carrying out the core's actions (on `queue`)

    /// Seconds since `start`. Read a few times a line: one vDSO clock read and a subtraction, where
    /// `ContinuousClock` arithmetic (`Duration.components`, 128-bit) cost about 400 instructions a paced line.
    var now: Double { Double(BootClock.nanoseconds &- start) / 1e9 }

    func apply(_ event: ClientCore.Event) {
        performAndClock(core.handle(event, now: now))
    }

    /// Carries out what the core answered to an event (`apply`, or a call such as `appended(moving:)`), and starts
    /// the clock again: something happened.
    func performAndClock(_ actions: [ClientCore.Action]) {
        perform(actions)
        if !ticking && core.exitCode == nil { scheduleTick() }
    }

    func handle(_ event: LinkDriver.Event) {
        switch event {
        case .opened(let id, let subprotocol): apply(.connected(id, subprotocol: subprotocol))
        case .frame(let id, let bytes):
            Trace.mark("ackrecv")
            lastFrameFrom = id
            apply(.frame(id, bytes))
            settleAfterFrame()  // an ack that leaves nothing to time: no tick
        case .closed(let id, let reason):
            if lazyOn == id { lazyOn = nil }
            apply(.closed(id, reason: reason))
            // The desktop closes the connection once it has read the `bye`: nothing is left to wait for.
            if finishing && id == lastFrameFrom { complete() }
        case .found(let list): apply(.found(list))
        }
    }

    func perform(_ actions: [ClientCore.Action]) {
        var dialed = false
        defer {
            // Message 1 is sealed while the connections are made (its DH needs nothing from the desktop).
            if dialed { core.prepareHandshakes() }
        }
        for action in actions {
            switch action {
            case .dial(let id, let candidate, let path, let offer):
                Trace.mark("dial")
                driver.dial(id, candidate, path: path, subprotocols: offer)
                dialed = true
            case .send(let id, let frame):
                send(frame, on: id)
            case .close(let id): driver.close(id)
            case .ackJournal(let seq):
                ackToJournal = max(ackToJournal, seq)  // written at the next tick
                rememberHeldAddress()  // the first line is through: peers.json's write no longer competes with it
            case .rememberAddress(let candidate):
                // Off the queue, and only when it writes: a dispatch worker started for nothing (the usual case: the
                // same address within a minute) competed with the handshake's last steps for the CPU. A stream
                // holds it until the first ack (or its end): started here, the write's two fsyncs and its worker
                // thread ran beside the `resume` round trip and the first line (about 0.3 ms of a cold first line,
                // README → Experiments). A one-shot starts it at once: it overlaps the round trip that the exit
                // waits for anyway, where at the ack it would add to the exit.
                guard SessionLink.wouldRemember(candidate, of: desktop, in: peers) else { break }
                addressToRemember = candidate
                if case .texts = options.source { rememberHeldAddress() }
            case .report(let report): show(report)
            case .syncJournal:
                journalAck()
                syncJournalAtEnd()  // a failure is reported, not dropped (Sender+JournalFailure.swift)
            case .exit(let code): finish(code)
            }
        }
    }

    /// A sealed frame to the socket thread (the trace's "sealed, queued" mark): `perform`'s `.send` and a paced
    /// line's `.frame`.
    func send(_ frame: [UInt8], on id: AttemptID) {
        Trace.mark("encrypt")
        driver.send(frame, on: id)
    }

    /// Hands the held address to `syncQueue`, which writes peers.json (fsynced); `complete` waits for it.
    func rememberHeldAddress() {
        guard let candidate = addressToRemember else { return }
        addressToRemember = nil
        Trace.mark("remember")
        syncQueue.async { [desktop, peers] in SessionLink.remember(candidate, of: desktop, in: peers) }
    }

    func show(_ report: ClientCore.Report) {
        switch report {
        case .connected(let address):
            Trace.mark("noise")  // the handshake is done; `resume` goes next
            status.connected(address, now: now)
        case .waiting(let reason): status.waiting(reason, now: now)
        case .info(let text): status.info(text)
        case .warning(let text): status.warning(text)
        case .error(let text, let hint): status.error(text, hint: hint)
        case .progress(let queued, let delivered): status.tick(now: now, queued: queued, delivered: delivered)
        }
    }

    func finish(_ code: Int32) {
        status.erase()
        if code == 0 && status.isTerminal {
            Console.info("\"\(desktop.name)\" acknowledged \(core.acknowledgedThisRun) line(s)")
        }
        // Give the bye frame a moment to leave before the context goes away: at most 50 ms, less when the desktop
        // closes the connection first (it does once it has read the bye).
        finishing = true
        queue.asyncAfter(.milliseconds(50)) { self.complete() }
    }

    /// Closes every connection and lets `run` return. Once; on `queue`.
    func complete() {
        guard !completed else { return }
        completed = true
        journalAck()
        driver.stopFinding()
        perform(core.hangUp())
        rememberHeldAddress()
        syncQueue.sync {}  // the address just remembered is on disk before `run` returns
        syncer.drain()  // and any journal fsync under way
        // Ends that did not come through `.syncJournal` (a failed journal write, an exit before the last lines'
        // deadline): what this run wrote is made durable here too.
        if journalFailure == nil && (needsSync || journalDirty) { syncJournalAtEnd() }
        settleJournalAtEnd()  // a journal whose sync failed: rewritten, or exit 74 if lines are left in it
        if core.exitCode == 0 && journalFailure == nil {
            // Everything acknowledged: the next start reads the journal's header only, not every line of this run.
            do {
                try outbox.resetIfDrained()
            } catch {
                status.warning("cannot shorten the journal: \(error.description)")  // it is read whole next time
            }
        }
        finished.signal()
    }
}

/// CLOCK_BOOTTIME in nanoseconds: monotonic, and counting while the machine is suspended, like `ContinuousClock`.
enum BootClock {
    static var nanoseconds: UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_BOOTTIME, &ts)  // cannot fail for this clock id on Linux ≥ 2.6.39
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }
}
