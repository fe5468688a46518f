import FoundationEssentials
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore
import SpeakBridgeSupport

/// One sink's thread: waits for readiness, skips what the sink already took, writes, records progress as the sink's
/// `DeliveryClass` says, reports to the pipeline.
/// Its queue is bounded by the pipeline's backlog rule (`BacklogMeter`): the daemon stops reading a device that
/// is over the high-water mark and refuses its messages above the hard limit. It is fair between devices
/// (`FairQueue`): one device's backlog never sits in front of another device's line, and a device the sink holds
/// for a reason of its own (`SinkError.Scope.session`: its window lost the focus, a text the method cannot type) or
/// whose turn is up (`.turnUsedUp`: a long text being typed) goes behind the others, so it never keeps them waiting.
// `@unchecked Sendable` is sound: `queue`, `stopped`, `busy`, `delivering`, `revokedWhileDelivering`,
// `currentProblem` and `reportedHold` are guarded by `condition`; `progressSlot` is touched only inside `deliver`, which runs only while this runner's `busy` is set
// (by the runner thread or by an inline write, never both: `busy` is taken under `condition`); `warnedWaiting`,
// `warnedHolds` and `heldInARow` only by the runner thread (`run` and what it calls); the rest is set once in init.
final class SinkRunner: @unchecked Sendable {
    typealias SessionKey = DeliveryPipeline.SessionKey
    typealias HeldChunk = DeliveryPipeline.HeldChunk

    let sink: any Sink
    /// The sink's place in the pipeline's levels and backlog meter.
    let index: Int
    let deliveryClass: DeliveryClass
    let progress: ProgressLog
    unowned let pipeline: DeliveryPipeline
    let revocations: RevocationCounter
    let condition = ThreadCondition()
    var queue = FairQueue<DeviceID, SinkItem>()
    var stopped = false
    /// A delivery is in progress (on the runner thread or inline); guarded by `condition`.
    var busy = false
    /// The device whose batch (of `deliveringCount` items) the runner thread is delivering from the front of its
    /// lane (nil: none, or an inline write, which is not in the queue). Guarded by `condition`.
    var delivering: DeviceID?
    var deliveringCount = 0
    /// `drop` came for `delivering`'s device during its delivery: the lane is cut after the batch (`consume`
    /// needs the batch where `next` found it). The revocation's generation. Guarded by `condition`.
    var revokedWhileDelivering: UInt64?
    var currentProblem: String?
    /// What `onHeld` last said (reason and held sessions); nil reason: nothing held was reported.
    var reportedHold: (reason: String, held: [HeldChunk])?
    /// The progress log's slot of the last session this sink recorded (see `ProgressSlot`): a session's next
    /// record needs no lookup. Only `deliver` uses it.
    var progressSlot: ProgressSlot?
    /// The reason the sink was last not ready for a whole second, as warned (once, until it takes a batch again).
    /// Only the runner thread (`run`) reads and writes it.
    var warnedWaiting: String?
    /// Per device, the session hold (`SinkError.Scope.session`) last warned about, so that one is logged once
    /// while other devices' texts go through between its retries. Only the runner thread (`run`) uses it.
    var warnedHolds: [DeviceID: String] = [:]
    /// Batches in a row that were held for their session's own reason and took nothing: once every queued device
    /// was tried, the runner pauses before the next round. Only the runner thread (`run`) uses it.
    var heldInARow = 0
    static let batchLimit = 256
    static let batchBytes = 64 << 10
    /// FIFO writes never block (the sink polls first), so when this sink is idle and ready, a new chunk is
    /// written right on the caller's thread: one thread wake-up less per chunk. Anything that cannot be
    /// written at once goes to the runner thread as usual, so a slow reader still stalls nothing.
    let writesInline: Bool
    /// Whether a revocation stops a batch of this sink between two writes (a tool sink's runs: typing, the
    /// clipboard). Not the byte sinks (stdout, FIFO, JSONL, transcript): their batch is at most 64 KiB written at
    /// once, a full pipe gives the runner back at once anyway, and a text longer than a pipe's atomic write goes
    /// out in pieces that a stop could cut in two, to be continued by another device's line.
    let stopsBetweenWrites: Bool

    init(sink: any Sink, index: Int, progress: ProgressLog, pipeline: DeliveryPipeline) {
        self.sink = sink
        self.index = index
        self.progress = progress
        self.pipeline = pipeline
        revocations = pipeline.revocationCount
        deliveryClass = sink.deliveryClass
        writesInline = sink is FIFOSink || sink is JSONLSink
        stopsBetweenWrites = !(sink is FIFOSink || sink is JSONLSink || sink is StdoutSink || sink is TranscriptSink)
    }

    func start() {
        Threads.start(name: "sb-sink") { [self] in run() }
    }

    var problem: String? { condition.locked { currentProblem } }
    var queuedCount: Int { condition.locked { queue.count } }

    /// `items` are one message's chunks: one device, one session (`key`), ascending. `known`: this sink's level
    /// of the session, when the caller read it already (nil: asked here).
    func enqueue(_ items: [SinkItem], key: SessionKey, known: UInt64? = nil) {
        guard let first = items.first else { return }
        // Skip what this sink already took (it may be ahead of the ack level after a restart); skipped chunks
        // count as taken by this sink, for the levels and the backlog.
        var fresh = items[...]
        if let level = known ?? pipeline.level(sink: index, key), first.seq <= level {
            let skipped = items.prefix { $0.seq <= level }
            report(skipped, key: key)
            fresh = items.dropFirst(skipped.count)
        }
        guard !fresh.isEmpty else { return }
        let inline: [SinkItem]? = condition.locked {
            if writesInline && !busy && !stopped && queue.isEmpty && fresh.count <= Self.batchLimit {
                busy = true
                return Array(fresh)
            }
            queue.append(first.device, fresh)
            condition.signal()
            return nil
        }
        guard let batch = inline else { return }
        // No `waitUntilReady(.zero)` first: the FIFO's non-blocking write itself says when the pipe is full or has
        // no reader (no poll(2) per line). Such a pipe takes nothing; that is not reported as a problem here (the
        // runner thread waits for readiness and reports what lasts).
        let (taken, problem, revoked, _) = deliver(batch)
        report(batch[0..<taken], key: key)
        condition.locked {
            // The problem is set under this lock round trip, not one of its own (one lock pair per line less).
            if !revoked && (taken > 0 || problem == nil) { currentProblem = problem }
            // The queue was empty: these stay first. Not the rest of a revoked device's message (one message: all
            // of it was accepted before the revocation).
            queue.append(first.device, revoked ? batch[taken..<taken] : batch[taken...])
            busy = false
            // Wake the runner only when it has work: after an inline write that took everything, waking it cost a
            // thread wake-up (and three futex calls) per line for nothing.
            if !queue.isEmpty { condition.signal() }
        }
    }

    /// Tells the pipeline that `items` (in order) were taken. `key`: every item is of that session (one message's
    /// chunks), so the run is reported without making its key again.
    func report(_ items: ArraySlice<SinkItem>, key: SessionKey? = nil) {
        guard !items.isEmpty else { return }
        if let key {
            var bytes: UInt64 = 0
            for item in items { bytes &+= UInt64(item.textUTF8Count) }
            let last = items[items.endIndex - 1]
            pipeline.sinkAdvanced(index, DeliveryPipeline.Advance(
                key: key, seq: last.seq, taken: BacklogMeter.Level(chunks: UInt64(items.count), bytes: bytes),
                generation: last.generation))
            return
        }
        // By runs of one (device, session): one advance per run, in order (the last run of a session gives its
        // level, as its last item did). A batch is nearly always one run: then nothing is allocated.
        var advances: [DeliveryPipeline.Advance] = []
        var start = items.startIndex
        while start < items.endIndex {
            let first = items[start]
            var end = start
            var bytes: UInt64 = 0
            while end < items.endIndex, items[end].isSameSession(as: first) {
                bytes &+= UInt64(items[end].textUTF8Count)
                end += 1
            }
            let advance = DeliveryPipeline.Advance(
                key: SessionKey(device: first.device, session: first.session), seq: items[end - 1].seq,
                taken: BacklogMeter.Level(chunks: UInt64(end - start), bytes: bytes),
                generation: items[end - 1].generation)
            if start == items.startIndex && end == items.endIndex {
                pipeline.sinkAdvanced(index, advance)
                return
            }
            advances.append(advance)
            start = end
        }
        pipeline.sinkAdvanced(index, advances)
    }

    func stop() {
        condition.locked {
            stopped = true
            condition.signal()
        }
    }

    func setProblem(_ p: String?) { condition.locked { currentProblem = p } }

    /// `DeliveryPipeline.isRevoked`, its usual answer (nothing revoked since `item` was accepted) read from the
    /// pipeline's counter, which this runner holds strongly (`pipeline` is unowned: reaching it costs a retain).
    func isRevoked(_ item: SinkItem) -> Bool {
        guard revocations.count.load(ordering: .acquiring) > item.generation else { return false }
        return pipeline.isRevoked(item)
    }

    /// `device` was revoked (`generation`: the pipeline's revocation count for it): its queued items, all accepted
    /// before, go; none is written. A batch of it being delivered now stops before its next write (`deliver`
    /// asks `isRevoked`), and the rest of its lane goes when the batch returns.
    func drop(_ device: DeviceID, generation: UInt64) {
        condition.locked {
            if delivering == device {
                // The batch stays at the front until `consume`; the rest goes now (`status` stops counting it).
                revokedWhileDelivering = max(revokedWhileDelivering ?? 0, generation)
                queue.removeAll(device, keepingFirst: deliveringCount) { $0.generation < generation }
            } else {
                queue.removeAll(device) { $0.generation < generation }
            }
        }
    }

    func run() {
        while true {
            condition.lock()
            while (queue.isEmpty || busy) && !stopped { condition.wait() }
            if stopped {
                condition.unlock()
                sink.close()
                return
            }
            // One device's items, at most `batchLimit` texts and about `batchBytes` bytes: a sink that takes only a
            // pipe's worth per call (a FIFO whose reader is slow) must not re-frame megabytes per 64 KiB written.
            guard let (device, batch) = queue.next(limit: Self.batchLimit, budget: Self.batchBytes,
                                                   weight: { $0.textUTF8Count }) else {
                condition.unlock()
                continue
            }
            busy = true
            delivering = device
            deliveringCount = batch.count
            condition.unlock()

            if let reason = sink.waitUntilReady(timeout: .seconds(1)) {
                // Not ready for a whole second: said once (until the sink works again), then `status` shows it.
                if reason != warnedWaiting {
                    warnedWaiting = reason
                    Console.warning("sink \(sink.label): \(reason)")
                }
                setProblem(reason)
                condition.locked { finishDelivery(device, taken: 0, of: batch.count) }
                reportHeld(reason)  // not ready for a whole second: a problem worth telling the device
                continue
            }
            let (taken, problem, revoked, scope) = deliver(batch)
            // A revocation is not the sink's doing: whatever it reported before (a full FIFO, a failing tool)
            // still stands. A used-up turn is no problem at all.
            if !revoked {
                if taken > 0 { warnedWaiting = nil }
                if scope != .turnUsedUp { setProblem(problem) }
            }
            // Held for its session's own reason, or its turn is up: the device goes behind the others.
            let behind = problem != nil && scope != .sink
            let devices: Int = condition.locked {
                finishDelivery(device, taken: taken, of: batch.count, behind: behind)
                // Stopped because the device was revoked: what it still queues was accepted before, too.
                if revoked, let generation = pipeline.revokedGeneration(device) {
                    queue.removeAll(device) { $0.generation < generation }
                }
                return queue.keyCount
            }
            report(batch[0..<taken])
            if revoked { continue }
            if taken > 0 || scope != .session { heldInARow = 0 }
            if !warnedHolds.isEmpty, taken > 0 || devices == 0 {
                if devices == 0 { warnedHolds.removeAll() } else { warnedHolds[device] = nil }
            }
            if behind, let problem {
                if scope == .session { heldSession(device, problem, tookNothing: taken == 0, devices: devices) }
                continue
            }
            if let problem, taken == 0, !writesInline {
                reportHeld(problem)
            } else if problem == nil {
                reportHeld(nil)
            }
            // A failing sink is retried after a pause, so it is not hammered. Not a FIFO: a full pipe is waited for
            // by `waitUntilReady` (poll), which returns the moment the reader made room; a fixed 200 ms sleep there
            // held every device's lines whenever a fast reader fell behind for an instant.
            if taken == 0 && problem != nil && !writesInline {
                Threads.sleep(seconds: 0.2)
            }
        }
    }

    /// `device`'s batch was held for its session's own reason (`SinkError.Scope.session`): told once (log and
    /// `onHeld`, for that device's sessions only), and once every queued device was tried without any taking
    /// something, a pause before the next round, so that the sink is not hammered.
    private func heldSession(_ device: DeviceID, _ problem: String, tookNothing: Bool, devices: Int) {
        if warnedHolds[device] != problem {
            warnedHolds[device] = problem
            Console.warning("sink \(sink.label): \(problem)")
        }
        reportHeld(problem, only: device)
        guard tookNothing else { return }
        heldInARow += 1
        if heldInARow >= devices {
            heldInARow = 0
            Threads.sleep(seconds: 0.2)
        }
    }

    /// Under `condition`, after the runner thread's delivery of a batch of `device`'s lane: `taken` items went;
    /// `behind`: the lane goes behind the others (see `FairQueue.consume`).
    private func finishDelivery(_ device: DeviceID, taken: Int, of count: Int, behind: Bool = false) {
        busy = false
        delivering = nil
        deliveringCount = 0
        queue.consume(device, taken: taken, of: count, behind: behind)
        if let generation = revokedWhileDelivering {
            revokedWhileDelivering = nil
            queue.removeAll(device) { $0.generation < generation }
        }
    }

    /// Fires `onHeld` when a lasting problem starts, changes or holds new sessions, and when it clears (`reason`
    /// nil: with the sessions it held). A FIFO that is full for an instant is flow control, not a problem: only
    /// the runner thread reports, after a whole second of waiting or a failed tool run. `only`: the hold is that
    /// device's own (`SinkError.Scope.session`), and only its sessions are reported held.
    func reportHeld(_ reason: String?, only device: DeviceID? = nil) {
        let report: (String?, [HeldChunk])? = condition.locked {
            guard let reason else {
                defer { reportedHold = nil }
                return reportedHold.map { (nil, $0.held) }
            }
            var first: [SessionKey: UInt64] = [:]
            var order: [SessionKey] = []
            queue.forEach { lane, item in
                if let device, lane != device { return }
                let key = SessionKey(device: item.device, session: item.session)
                if first[key] == nil { order.append(key) }
                first[key] = min(first[key] ?? .max, item.seq)
            }
            let held = order.map { HeldChunk(device: $0.device, session: $0.session, firstHeldSeq: first[$0]!) }
            if let last = reportedHold, last.reason == reason,
               Set(held.map { SessionKey(device: $0.device, session: $0.session) })
                .isSubset(of: last.held.map { SessionKey(device: $0.device, session: $0.session) }) {
                return nil
            }
            reportedHold = (reason, held)
            return (reason, held)
        }
        if let (reason, held) = report { pipeline.onHeld.call(sink.label, reason, held) }
    }

    /// Writes `batch`; returns how many items the sink fully took, and the problem if it stopped early. Progress
    /// is recorded per the sink's class: (a) at `willWrite`, rolled back if the write then fails; (b) at
    /// `didWrite`; (c) never (the sink holds its own). `revoked`: the sink was stopped before a write because the
    /// batch's device was revoked meanwhile (not a problem of the sink; the rest of the batch is not written).
    /// `scope`: whom the problem holds (`SinkError.Scope`); `.sink` when there is none.
    func deliver(_ batch: [SinkItem]) -> (taken: Int, problem: String?, revoked: Bool, scope: SinkError.Scope) {
        let label = sink.label
        var recorder = ProgressRecorder(slot: progressSlot)
        defer { progressSlot = recorder.slot }
        var recordFailure: StoreError?
        let recordsBefore = deliveryClass == .recordBeforeWrite
        let recordsAfter = deliveryClass == .recordAfterWrite
        let progress = self.progress
        // A batch is one device's, accepted before its revocation or not: then none of it is written.
        if isRevoked(batch[0]) { return (0, nil, true, .sink) }
        do throws(SinkError) {
            try sink.deliver(batch, willWrite: { (k: Int) throws -> Void in
                // A tool sink is stopped between its runs (each may type for seconds). Asked again on the way out
                // (below), so that no captured flag is written here: a mutable capture is boxed, and each access
                // of it is checked.
                if stopsBetweenWrites, isRevoked(batch[k - 1]) { throw SinkError(message: "the device was revoked") }
                guard recordsBefore else { return }
                do throws(StoreError) { try recorder.record(through: k, of: batch, sink: label, into: progress) }
                catch {
                    throw SinkError(delivered: recorder.recorded,
                                    message: "cannot record progress: \(error.description)", hint: error.hint)
                }
            }, didWrite: { k in
                guard recordsAfter, recordFailure == nil else { return }
                // Written but not recorded: after a crash it comes again, which class (b) readers drop by seq.
                do throws(StoreError) { try recorder.record(through: k, of: batch, sink: label, into: progress) }
                catch { recordFailure = error }
            })
            if let recordFailure {
                let message = "cannot record progress: \(recordFailure.description)"
                Console.warning("sink \(label): \(message)")
                return (batch.count, message, false, .sink)
            }
            Trace.mark("sink", batch.last?.seq ?? 0)
            Console.debug("\(label): wrote \(batch.count) text(s)")
            return (batch.count, nil, false, .sink)
        } catch {
            let taken = min(error.delivered, batch.count)
            // Nothing to record or roll back: the device's progress went with it (a record of it is refused).
            if isRevoked(batch[min(taken, batch.count - 1)]) { return (taken, nil, true, .sink) }
            // Logged once per distinct failure (a failing sink is retried every 200 ms), never with the text. Not a
            // full FIFO (flow control: the runner waits for room at once; a wait of a whole second is reported).
            // Not a session's own hold (`run` logs it once per device) nor a used-up turn (no failure).
            if error.message != problem && !error.waitsForRoom && error.scope == .sink {
                Console.warning("sink \(label): \(error.message)" + (error.hint.map { " (\($0))" } ?? ""))
            }
            if recordsAfter, taken > recorder.recorded {
                try? recorder.record(through: taken, of: batch, sink: label, into: progress)
            }
            let recorded = recorder.recorded
            if recordsBefore, recorded > taken {
                // Roll back records made for items that did not get written.
                var restore: [SessionKey: UInt64] = [:]
                for item in batch[taken..<recorded] {
                    let key = SessionKey(device: item.device, session: item.session)
                    restore[key] = recorder.levelBefore(item, in: batch) ?? 0
                }
                for item in batch[0..<taken] {
                    let key = SessionKey(device: item.device, session: item.session)
                    if restore[key] != nil { restore[key] = item.seq }
                }
                for (key, seq) in restore {
                    _ = try? progress.record(.init(sink: label, device: key.device, session: key.session), seq: seq,
                                             cached: nil, generation: batch[taken].generation)
                }
            }
            return (taken, error.message, false, error.scope)
        }
    }
}
