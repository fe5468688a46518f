import Dispatch
import FoundationEssentials
import Synchronization
public import SpeakBridgeProtocol
public import SpeakBridgeSinks
import SpeakBridgeStore
import SpeakBridgeSupport

/// Moves accepted chunks into every sink, exactly once and in order, and reports when they are durable. This is
/// where exactly-once is decided: `DeliveryLevels` (one value, under `lock`) holds every sink's level and
/// the ack level; the sinks' crash rule is `DeliveryClass`.
///
/// Flow:
/// 1. `init` seeds the levels from durable state: the progress log for sinks of class (a) and (b), the sink's own
///    position (`Sink.position`) for class (c).
/// 2. `submit` appends chunks (already de-duplicated by the ledger) to every sink's queue.
/// 3. Each sink has its own thread (`SinkRunner`): it waits until the sink can take a write, skips what the sink
///    already took (`DeliveryLevels.taken`), writes, and records progress as the sink's class says: right before
///    the write (a), right after it (b), or not at all (c, the sink fsyncs its own). A write that fails rolls a
///    class-(a) record back. A slow or blocked sink only holds up its own queue; when its problem starts, changes
///    or clears, `onHeld` says which (device, session) it holds from which seq.
/// 4. When every sink has a (device, session) through seq N, the committer fsyncs the log once for all such
///    advances (group commit) and only then calls `onDurable`, which sends the acks. The fsyncs are paced
///    (`CommitPacing`): at once after a quiet spell, else at most one per interval while advances keep coming.
/// Backpressure: `submit` and the runners' reports keep a `BacklogMeter` (per device: handed to the sinks, not
/// yet taken by all) under the same lock, with no extra thread hop; `submit` answers `.pause` above the
/// high-water mark and `onDrained` fires (on the committer's or a runner's thread) when a paused device fell to
/// the low-water mark. `retire` and `forget` drop a session's or a device's levels here and in the log.
// `@unchecked Sendable` is sound: every mutable field is guarded by `lock` (runners are set once in init); `bell` is a
// semaphore, thread-safe.
public final class DeliveryPipeline: @unchecked Sendable {
    /// A (device, session). Its hash is computed once, when the key is made: a line's key is looked up three or
    /// four times (the sink's level, the advance, the pending set), and hashing the session string each time cost
    /// about 650 instructions a lookup. The stored value is the process-seeded `Hasher`'s own, so a peer that
    /// picks session IDs can no more make keys collide than before; equality still compares both fields.
    public struct SessionKey: Hashable, Sendable {
        public let device: DeviceID
        public let session: String
        let digest: Int

        public init(device: DeviceID, session: String) {
            self.device = device
            self.session = session
            var hasher = Hasher()
            hasher.combine(device)
            hasher.combine(session)
            digest = hasher.finalize()
        }

        public static func == (a: SessionKey, b: SessionKey) -> Bool {
            a.digest == b.digest && a.device == b.device && a.session == b.session
        }

        public func hash(into hasher: inout Hasher) { hasher.combine(digest) }
    }

    /// What a sink with a problem holds of one session: everything from `firstHeldSeq` on.
    public struct HeldChunk: Sendable, Equatable {
        public var device: DeviceID
        public var session: String
        public var firstHeldSeq: UInt64
    }

    public struct Health: Sendable {
        public var label: String
        public var problem: String?
        public var queued: Int
        /// How the sink works, when it says (`DescribedSink.method`, e.g. the typing method and why).
        public var method: String? = nil
    }

    struct DurableHandler: Sendable { let call: @Sendable ([(SessionKey, UInt64)]) -> Void }
    struct DrainedHandler: Sendable { let call: @Sendable ([DeviceID]) -> Void }
    struct HeldHandler: Sendable { let call: @Sendable (String, String?, [HeldChunk]) -> Void }

    public let progress: ProgressLog
    /// Whether a sink may show the device's name (`submit(name:)`): false when every sink is a FIFO, which writes
    /// the text alone, so the caller need not look the name up per line. Any other sink counts as showing it.
    public let showsDeviceNames: Bool
    var runners: [SinkRunner] = []
    let onDurable: DurableHandler
    let onDrained: DrainedHandler
    let onHeld: HeldHandler
    let lock = ThreadLock()
    /// Where the committer sleeps (see `commitLoop`): posted only by whoever finds it waiting, under `lock`.
    let bell = DispatchSemaphore(value: 0)
    var levels: DeliveryLevels
    var stopped = false
    var commitFailure: String?
    var meter: BacklogMeter
    /// `meter.mayOverflow`, published after each change of the meter, so that `isOverflowing` answers the usual
    /// "no device is at the hard limit" without the lock. Only a submit raises a backlog, and submits come from
    /// the thread that asks (the daemon's queue), after its own store: a false read is never stale.
    let mayOverflow = Atomic<Bool>(false)
    let pacing: CommitPacing
    /// What the committer does, so that an advance wakes it only when it would act on it: waiting for work
    /// (`idle`), or pacing and the chunks waiting just reached `pacing.flushAt`. Whoever rings the bell sets it
    /// `busy`, so a wait is rung at most once. Guarded by `lock`.
    var committer = Committer.busy
    enum Committer { case idle, pacing, busy }
    /// How many times the committer's waits returned (rung, timed out, or spuriously): tests count its wake-ups.
    /// Guarded by `lock`.
    var committerWakeups = 0
    /// Per session, the last chunk of an urgent submit (the first chunks of a connection: a one-shot `send --text`
    /// waits for their ack): once every sink has it, `flushNow` ends the pacing wait. Guarded by `lock`.
    var urgent: [SessionKey: UInt64] = [:]
    var flushNow = false
    /// Devices revoked (`forget`) and the generation each accepted message is stamped with. Guarded by `lock`.
    var revocations = Revocations()
    /// `revocations.count`, published at each revocation: a runner asks `isRevoked` per write, and while nothing
    /// was revoked since an item was accepted the answer needs no lock.
    let revocationCount = RevocationCounter()
    /// The key of the last `submit`'s session (reused while the same session streams). Guarded by `lock`.
    var lastSubmitKey: SessionKey?
    /// Advances committed since the heap was last trimmed, and how many trims ran (tests). Guarded by `lock`.
    var committedSinceTrim = 0
    var trims = 0
    /// A quiet spell after at least this many committed advances trims the heap (a burst; never a trickle).
    static let trimAfterChunks = 4_096
    /// How long nothing must have been committed before that trim (nanoseconds). A trim holds glibc's arena locks
    /// while it walks the heap (every other thread's malloc waits), so it must not run in the middle of traffic:
    /// under a steady trickle (100 devices at 10 lines a second) the pipeline is empty between fsyncs all the time.
    let trimQuietNanoseconds: UInt64

    /// - `onDurable`: (device, session) advanced to an ack level (committer thread).
    /// - `onDrained`: paused devices fell to the low-water mark (committer or runner thread).
    /// - `onHeld(label, reason, held)`: sink `label` got a problem (`reason`), a different one, or more held
    ///   sessions; `reason` nil: the problem cleared, and `held` lists what it held before (runner thread).
    public init(sinks: [any Sink], progress: ProgressLog, limits: BacklogMeter.Limits = .desktop,
                pacing: CommitPacing = .desktop, trimQuietNanoseconds: UInt64 = 1_000_000_000,
                onDurable: @escaping @Sendable ([(SessionKey, UInt64)]) -> Void,
                onDrained: @escaping @Sendable ([DeviceID]) -> Void,
                onHeld: @escaping @Sendable (String, String?, [HeldChunk]) -> Void = { _, _, _ in }) {
        self.progress = progress
        self.pacing = pacing
        self.trimQuietNanoseconds = trimQuietNanoseconds
        showsDeviceNames = sinks.contains { !($0 is FIFOSink) }
        self.onDurable = DurableHandler(call: onDurable)
        self.onDrained = DrainedHandler(call: onDrained)
        self.onHeld = HeldHandler(call: onHeld)
        meter = BacklogMeter(sinks: sinks.count, limits: limits)
        Self.registerTranscripts(sinks, progress)
        levels = DeliveryLevels(sinks: sinks.count, seeds: Self.seeds(sinks, progress))
        runners = sinks.enumerated().map { SinkRunner(sink: $1, index: $0, progress: progress, pipeline: self) }
        mayOverflow.store(meter.mayOverflow, ordering: .releasing)  // limits that refuse even an empty backlog
        Threads.start(name: "sb-commit") { [self] in commitLoop() }
        for runner in runners { runner.start() }
    }

    /// Each sink's durable position per live session: from the log for (a)/(b), from the sink for (c).
    static func seeds(_ sinks: [any Sink], _ progress: ProgressLog) -> [SessionKey: [Int: UInt64]] {
        var seeds: [SessionKey: [Int: UInt64]] = [:]
        var logged: [SessionKey: [String: UInt64]] = [:]
        for (key, seq) in progress.entries() {
            logged[SessionKey(device: key.device, session: key.session), default: [:]][key.sink] = seq
        }
        for (key, bySink) in logged {
            var positions: [Int: UInt64] = [:]
            for (index, sink) in sinks.enumerated() {
                let own = sink.deliveryClass == .ownPosition
                if let seq = own ? sink.position(device: key.device, session: key.session) : bySink[sink.label] {
                    positions[index] = seq
                }
            }
            // Only sinks of an older run know this session: everyone joins at their level.
            if positions.isEmpty, let seq = bySink.values.max() {
                for index in sinks.indices { positions[index] = seq }
            }
            seeds[key] = positions
        }
        return seeds
    }

    /// Records the transcript directories in the state directory (the progress log's), for `speakbridge sessions`.
    static func registerTranscripts(_ sinks: [any Sink], _ progress: ProgressLog) {
        let state = String(progress.path[..<(progress.path.lastIndex(of: "/") ?? progress.path.startIndex)])
        for case let transcript as TranscriptSink in sinks {
            do {
                try TranscriptRegistry.record(transcript.directory, stateDirectory: state.isEmpty ? "." : state)
            } catch {
                Console.warning("cannot record the transcript directory for `speakbridge sessions`: \(error.description)")
            }
        }
    }

    /// The ack level of (device, session): 0 when unknown.
    public func delivered(_ key: SessionKey) -> UInt64 {
        lock.locked { levels.ackLevel(key) ?? 0 }
    }

    /// Every (device, session) ack level, for seeding the ledgers at start.
    public func durableLevels() -> [SessionKey: UInt64] { lock.locked { levels.ackLevels } }

    /// Every retired (device, session) with its ack level (from the log), for seeding the ledgers at start.
    public func retiredLevels() -> [DeviceID: [String: UInt64]] { progress.retiredEntries() }

    /// What sink `index` has taken of `key`; for a class-(c) sink that has no level yet, its own position is asked
    /// (outside the lock: the sink may take its own) and adopted.
    func level(sink index: Int, _ key: SessionKey) -> UInt64? {
        if let known = lock.locked({ levels.level(sink: index, key) }) { return known }
        let sink = runners[index].sink
        guard sink.deliveryClass == .ownPosition,
              let own = sink.position(device: key.device, session: key.session) else { return nil }
        let (level, ring) = lock.locked {
            levels.adopt(sink: index, key, own)
            let ring = levels.hasPending && committer == .idle
            if ring { committer = .busy }
            return (levels.level(sink: index, key), ring)
        }
        if ring { bell.signal() }
        return level
    }

    /// Hands accepted chunks to every sink. Counted in the backlog first (a sink that writes inline reports them
    /// taken before this returns). `.pause`: the device is over its high-water mark.
    /// - Parameter name: the device's name, for sinks that show it (jsonl, transcript).
    /// - Parameter urgent: fsync these chunks' progress as soon as every sink has them, without the pacing wait
    ///   (the first chunks of a connection: a one-shot send is waiting for their ack to exit).
    public func submit(device: DeviceID, session: String, chunks: [Chunk], name: String? = nil,
                       urgent isUrgent: Bool = false) -> BacklogMeter.Pressure {
        guard let last = chunks.last else { return .normal }
        var bytes: UInt64 = 0
        for i in chunks.indices { bytes &+= UInt64(chunks[i].textUTF8Count) }
        // Under the one lock: the session's key (the last submit's again when it is the same session, so its hash
        // is not computed again: about 200 instructions a line), the backlog, and what the (usually single) sink
        // already took of the session, which its runner needs to skip duplicates (a lock round trip and a lookup
        // per line less than asking later).
        let (key, pressure, firstLevel, generation) = lock.locked {
            let key: SessionKey
            if let previous = lastSubmitKey, previous.session == session, previous.device == device {
                key = previous
            } else {
                key = SessionKey(device: device, session: session)
                lastSubmitKey = key
            }
            if isUrgent { urgent[key] = last.seq }
            let pressure = meter.submit(device, chunks: UInt64(chunks.count), bytes: bytes)
            mayOverflow.store(meter.mayOverflow, ordering: .releasing)
            // The published count (a `let`'s load): reading `revocations` here cost a dynamic exclusivity check
            // a line. Written under this lock, so it is `revocations.count`.
            return (key, pressure, runners.isEmpty ? nil : levels.rememberingLevel(sink: 0, key),
                    revocationCount.count.load(ordering: .relaxed))
        }
        // One shared object for the message's items, holding the decoded chunk array itself (no copy per chunk).
        let items = SinkItem.items(device: device, deviceName: name, session: session, chunks: chunks,
                                   generation: generation)
        for runner in runners {
            runner.enqueue(items, key: key, known: runner.index == 0 ? firstLevel : nil)
        }
        return pressure
    }

    /// At or above the hard limit: the caller must not accept more of this device now.
    public func isOverflowing(_ device: DeviceID) -> Bool {
        guard mayOverflow.load(ordering: .acquiring) else { return false }
        return lock.locked { meter.isOverflowing(device) }
    }

    public func isThrottled(_ device: DeviceID) -> Bool { lock.locked { meter.isThrottled(device) } }

    public func undelivered(_ device: DeviceID) -> BacklogMeter.Level { lock.locked { meter.undelivered(device) } }

    /// One run of a sink's report: the session's new level, and how many chunks and text bytes of its device the
    /// sink took in it (for the backlog).
    struct Advance {
        var key: SessionKey
        var seq: UInt64
        var taken: BacklogMeter.Level
        /// The items' `SinkItem.generation`: an advance of items accepted before their device's revocation is
        /// ignored (its levels and backlog went with the revocation).
        var generation: UInt64 = 0
    }

    /// The generation of `device`'s last revocation (nil: never revoked): its items stamped below it are stale.
    func revokedGeneration(_ device: DeviceID) -> UInt64? { lock.locked { revocations.generation(device) } }

    /// Whether `item`'s device was revoked after the item was accepted (it must then not be written).
    func isRevoked(_ item: SinkItem) -> Bool {
        guard revocationCount.count.load(ordering: .acquiring) > item.generation else { return false }
        return lock.locked { revocations.isStale(item.device, generation: item.generation) }
    }

    /// Called by runner `index` after its sink took (or skipped as already taken) items, one `Advance` per run of
    /// one session, in order.
    func sinkAdvanced(_ index: Int, _ advances: [Advance]) {
        var drained: [DeviceID] = []
        let wake = lock.locked {
            var moved = false
            for advance in advances { apply(advance, sink: index, moved: &moved, drained: &drained) }
            return ringsCommitter(moved)
        }
        afterAdvances(wake, drained)
    }

    /// `sinkAdvanced` for one run (a paced line, or a batch of one session): the advance is read where it is, not
    /// copied out of a one-element collection (two copies of its key, about 300 instructions, per line).
    func sinkAdvanced(_ index: Int, _ advance: Advance) {
        var drained: [DeviceID] = []
        let wake = lock.locked {
            var moved = false
            apply(advance, sink: index, moved: &moved, drained: &drained)
            return ringsCommitter(moved)
        }
        afterAdvances(wake, drained)
    }

    /// One advance, under `lock`: the sink's level, an urgent session's flush, the backlog.
    private func apply(_ advance: Advance, sink index: Int, moved: inout Bool, drained: inout [DeviceID]) {
        let key = advance.key
        if revocationCount.count.load(ordering: .relaxed) > advance.generation,
           revocations.isStale(key.device, generation: advance.generation) { return }
        if levels.advance(sink: index, key, to: advance.seq) { moved = true }
        if !urgent.isEmpty, let through = urgent[key] {
            // Every sink has the urgent chunks: fsync without waiting (or they were already durable).
            if (levels.pendingLevel(key) ?? 0) >= through {
                flushNow = true
                urgent[key] = nil
            } else if (levels.ackLevel(key) ?? 0) >= through {
                urgent[key] = nil
            }
        }
        // One device's runs may come one by one: the meter reports a drained device once.
        if meter.taken(key.device, sink: index, chunks: advance.taken.chunks, bytes: advance.taken.bytes) {
            drained.append(key.device)
        }
    }

    /// Under `lock`, after the advances: publishes the meter's overflow flag, and whether the committer must be
    /// rung (a pacing committer sleeps through an advance unless it ends the wait: one futex pair per line less).
    private func ringsCommitter(_ moved: Bool) -> Bool {
        mayOverflow.store(meter.mayOverflow, ordering: .releasing)
        let ring = moved && (committer == .idle
                             || (committer == .pacing && (flushNow || levels.pendingChunks >= pacing.flushAt)))
        if ring { committer = .busy }
        return ring
    }

    /// After unlocking: the committer wakes into a free mutex instead of blocking on it at once. No wake-up is
    /// lost: `pending` changed under the lock, and the committer checks it under the lock before it waits.
    private func afterAdvances(_ wake: Bool, _ drained: [DeviceID]) {
        if wake { bell.signal() }
        if !drained.isEmpty { onDrained.call(drained) }
    }

    /// A retired session: nothing of it is in flight (the ledger retires only those), so its levels go.
    public func retire(_ key: SessionKey) {
        lock.locked {
            levels.retire(key)
            urgent[key] = nil
        }
    }

    /// A retired session whose ack level the log keeps instead of its per-sink progress (one line).
    public func retire(_ key: SessionKey, delivered: UInt64) throws(StoreError) {
        retire(key)
        try progress.retire(device: key.device, session: key.session, delivered: delivered)
    }

    /// A revoked device: drops what every sink still queues of it (a write under way finishes; the sink is
    /// stopped before its next one), its levels and backlog here and its progress in the log (one appended line,
    /// made durable at the next sync). So a revoked device's queued text — up to its high-water mark, minutes of
    /// typing — is never typed, pasted or written after the revocation. O(sessions + queued items), on revocation
    /// only. A class-(c) sink's files stay: they are the user's.
    public func forget(_ device: DeviceID) {
        let generation = lock.locked {
            let generation = revocations.revoke(device)
            revocationCount.count.store(generation, ordering: .releasing)
            levels.forget(device)
            meter.forget(device)
            mayOverflow.store(meter.mayOverflow, ordering: .releasing)
            urgent = urgent.filter { $0.key.device != device }
            if lastSubmitKey?.device == device { lastSubmitKey = nil }
            return generation
        }
        for runner in runners { runner.drop(device, generation: generation) }
        do {
            try progress.forget(device: device, generation: generation)
        } catch {
            Console.warning("cannot drop the progress of a revoked device: \(error.description)")
        }
    }

    /// The sinks, in command-line order (for commands addressed to a kind of sink, e.g. `type --here`).
    public var sinks: [any Sink] { runners.map(\.sink) }

    public func health() -> [Health] {
        var list = runners.map {
            Health(label: $0.sink.label, problem: $0.problem, queued: $0.queuedCount,
                   method: ($0.sink as? DescribedSink)?.method)
        }
        if let failure = lock.locked({ commitFailure }) {
            list.append(Health(label: "progress log", problem: failure, queued: 0))
        }
        return list
    }

    public func stop() {
        for runner in runners { runner.stop() }
        lock.locked {
            stopped = true
            committer = .busy
        }
        bell.signal()  // a post the committer does not need only costs it one more turn of its loop
    }
}
