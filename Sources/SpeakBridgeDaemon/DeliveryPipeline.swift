import Foundation
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore

/// Moves accepted chunks into every sink, exactly once and in order, and reports when they are durable.
///
/// Flow:
/// 1. `submit` appends chunks (already de-duplicated by the ledger) to every sink's queue.
/// 2. Each sink has its own thread (`SinkRunner`): it waits until the sink can take a write, records the
///    sink's progress in the `ProgressLog` immediately before each write system call, then writes. A write
///    that fails rolls the record back. A slow or blocked sink only holds up its own queue.
/// 3. When every sink has a (device, session) through seq N, the committer fsyncs the log once for all such
///    advances (group commit) and only then calls `onDurable`, which sends the acks.
/// After a restart, each sink resumes from its own recorded progress, so a sink that had already written a
/// chunk is not given it again even if another sink had not.
final class DeliveryPipeline: @unchecked Sendable {
    struct Item: Sendable {
        var device: DeviceID
        var session: String
        var chunk: Chunk
    }

    struct SessionKey: Hashable, Sendable {
        var device: DeviceID
        var session: String
    }

    struct DurableHandler: Sendable { let call: @Sendable ([(SessionKey, UInt64)]) -> Void }

    let progress: ProgressLog
    var runners: [SinkRunner] = []
    let onDurable: DurableHandler
    let condition = NSCondition()
    /// Per sink label: what it has taken (in memory, ahead of the fsync).
    var sinkLevels: [String: [SessionKey: UInt64]] = [:]
    /// The ack level: taken by every sink and fsynced.
    var durable: [SessionKey: UInt64] = [:]
    var pendingDurable: [SessionKey: UInt64] = [:]
    var stopped = false
    var commitFailure: String?

    init(sinks: [any Sink], progress: ProgressLog, onDurable: @escaping @Sendable ([(SessionKey, UInt64)]) -> Void) {
        self.progress = progress
        self.onDurable = DurableHandler(call: onDurable)
        let labels = sinks.map(\.label)
        // Seed levels from the log: a sink with no record for a session joins at the others' level.
        var perSession: [SessionKey: [String: UInt64]] = [:]
        for (key, seq) in progress.entries() {
            perSession[SessionKey(device: key.device, session: key.session), default: [:]][key.sink] = seq
        }
        for label in labels { sinkLevels[label] = [:] }
        for (key, bySink) in perSession {
            let known = labels.compactMap { bySink[$0] }
            let fallback = known.max() ?? bySink.values.max() ?? 0
            for label in labels { sinkLevels[label]![key] = bySink[label] ?? fallback }
            durable[key] = labels.map { sinkLevels[$0]![key]! }.min() ?? fallback
        }
        runners = sinks.map { SinkRunner(sink: $0, progress: progress, pipeline: self) }
        let committer = Thread { [self] in commitLoop() }
        committer.name = "sb-commit"
        committer.start()
        for runner in runners { runner.start() }
    }

    /// The ack level of (device, session): 0 when unknown.
    func delivered(_ key: SessionKey) -> UInt64 {
        condition.withLock { durable[key] ?? 0 }
    }

    /// The progress a sink starts from for a session it has not seen in this run.
    func level(sink: String, key: SessionKey) -> UInt64? {
        condition.withLock { sinkLevels[sink]?[key] }
    }

    func submit(device: DeviceID, session: String, chunks: [Chunk]) {
        guard !chunks.isEmpty else { return }
        let items = chunks.map { Item(device: device, session: session, chunk: $0) }
        for runner in runners { runner.enqueue(items) }
    }

    /// Called by a runner after its sink took `levels`.
    func sinkAdvanced(_ label: String, _ levels: [SessionKey: UInt64]) {
        condition.lock()
        defer { condition.unlock() }
        for (key, seq) in levels {
            sinkLevels[label, default: [:]][key] = max(sinkLevels[label]?[key] ?? 0, seq)
            let all = sinkLevels.values.map { $0[key] ?? 0 }.min() ?? seq
            if all > (durable[key] ?? 0), all > (pendingDurable[key] ?? 0) { pendingDurable[key] = all }
        }
        if !pendingDurable.isEmpty { condition.broadcast() }
    }

    func commitLoop() {
        while true {
            condition.lock()
            while pendingDurable.isEmpty && !stopped { condition.wait() }
            if stopped && pendingDurable.isEmpty {
                condition.unlock()
                return
            }
            let batch = pendingDurable
            pendingDurable = [:]
            condition.unlock()
            do {
                try progress.sync()
            } catch {
                // Disk full or I/O error: nothing is acknowledged; retry until it works.
                condition.withLock {
                    commitFailure = error.description
                    for (k, v) in batch where v > (pendingDurable[k] ?? 0) { pendingDurable[k] = v }
                }
                Thread.sleep(forTimeInterval: 1)
                continue
            }
            var advanced: [(SessionKey, UInt64)] = []
            condition.withLock {
                commitFailure = nil
                for (key, seq) in batch where seq > (durable[key] ?? 0) {
                    durable[key] = seq
                    advanced.append((key, seq))
                }
            }
            if !advanced.isEmpty { onDurable.call(advanced) }
        }
    }

    struct Health: Sendable {
        var label: String
        var problem: String?
        var queued: Int
    }

    func health() -> [Health] {
        var list = runners.map { Health(label: $0.sink.label, problem: $0.problem, queued: $0.queuedCount) }
        if let failure = condition.withLock({ commitFailure }) {
            list.append(Health(label: "progress log", problem: failure, queued: 0))
        }
        return list
    }

    func stop() {
        for runner in runners { runner.stop() }
        condition.withLock {
            stopped = true
            condition.broadcast()
        }
    }
}

/// One sink's thread: waits for readiness, records progress right before each write, writes, reports.
final class SinkRunner: @unchecked Sendable {
    let sink: any Sink
    let progress: ProgressLog
    unowned let pipeline: DeliveryPipeline
    let condition = NSCondition()
    var queue: [DeliveryPipeline.Item] = []
    var head = 0
    var stopped = false
    /// A delivery is in progress (on the runner thread or inline); guarded by `condition`.
    var busy = false
    var currentProblem: String?
    static let batchLimit = 256
    /// FIFO writes never block (the sink polls first), so when this sink is idle and ready, a new chunk is
    /// written right on the caller's thread: one thread wake-up less per chunk. Anything that cannot be
    /// written at once goes to the runner thread as usual, so a slow reader still stalls nothing.
    let writesInline: Bool

    init(sink: any Sink, progress: ProgressLog, pipeline: DeliveryPipeline) {
        self.sink = sink
        self.progress = progress
        self.pipeline = pipeline
        writesInline = sink is FIFOSink
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "sb-sink"
        thread.start()
    }

    var problem: String? { condition.withLock { currentProblem } }
    var queuedCount: Int { condition.withLock { queue.count - head } }

    func enqueue(_ items: [DeliveryPipeline.Item]) {
        let inline: [DeliveryPipeline.Item]? = condition.withLock {
            // Skip what this sink already took (it may be ahead of the ack level after a restart).
            let fresh = items.filter { item in
                let key = DeliveryPipeline.SessionKey(device: item.device, session: item.session)
                return pipeline.sinkLevelUnlocked(sink.label, key).map { item.chunk.seq > $0 } ?? true
            }
            if writesInline && !busy && !stopped && head == queue.count && fresh.count <= Self.batchLimit {
                busy = true
                return fresh
            }
            queue += fresh
            condition.signal()
            return nil
        }
        guard let batch = inline else { return }
        var taken = 0
        if sink.waitUntilReady(timeout: .zero) == nil {
            let (n, problem) = deliver(batch)
            taken = n
            setProblem(problem)
        }
        report(batch, taken: taken)
        condition.withLock {
            queue += batch[taken...]
            busy = false
            condition.signal()
        }
    }

    func report(_ batch: [DeliveryPipeline.Item], taken: Int) {
        guard taken > 0 else { return }
        var levels: [DeliveryPipeline.SessionKey: UInt64] = [:]
        for item in batch[0..<taken] {
            levels[DeliveryPipeline.SessionKey(device: item.device, session: item.session)] = item.chunk.seq
        }
        pipeline.sinkAdvanced(sink.label, levels)
    }

    func stop() {
        condition.withLock {
            stopped = true
            condition.signal()
        }
    }

    func setProblem(_ p: String?) { condition.withLock { currentProblem = p } }

    func run() {
        while true {
            condition.lock()
            while (head == queue.count || busy) && !stopped { condition.wait() }
            if stopped {
                condition.unlock()
                sink.close()
                return
            }
            busy = true
            let batch = Array(queue[head..<min(queue.count, head + Self.batchLimit)])
            condition.unlock()

            if let reason = sink.waitUntilReady(timeout: .seconds(1)) {
                setProblem(reason)
                condition.withLock { busy = false }
                continue
            }
            let (taken, problem) = deliver(batch)
            setProblem(problem)
            condition.withLock {
                busy = false
                head += taken
                if head > 4096 && head * 2 > queue.count {
                    queue.removeFirst(head)
                    head = 0
                }
            }
            report(batch, taken: taken)
            if taken == 0 && problem != nil {
                Thread.sleep(forTimeInterval: 0.2)
            }
        }
    }

    /// Writes `batch`; returns how many texts the sink fully took, and the problem if it stopped early.
    func deliver(_ batch: [DeliveryPipeline.Item]) -> (Int, String?) {
        var recorded = 0
        var before: [DeliveryPipeline.SessionKey: UInt64] = [:]
        let label = sink.label
        do throws(SinkError) {
            try sink.deliver(batch.map(\.chunk.text)) { (k: Int) throws -> Void in
                guard k > recorded else { return }
                var latest: [DeliveryPipeline.SessionKey: UInt64] = [:]
                for item in batch[recorded..<k] {
                    let key = DeliveryPipeline.SessionKey(device: item.device, session: item.session)
                    if before[key] == nil {
                        before[key] = progress.progress(sink: label, device: item.device, session: item.session) ?? 0
                    }
                    latest[key] = item.chunk.seq
                }
                do throws(StoreError) {
                    for (key, seq) in latest {
                        try progress.record(sink: label, device: key.device, session: key.session, seq: seq)
                    }
                } catch {
                    throw SinkError(delivered: recorded, message: "cannot record progress: \(error.description)",
                                    hint: error.hint)
                }
                recorded = k
            }
            return (batch.count, nil)
        } catch {
            let taken = min(error.delivered, batch.count)
            if recorded > taken {
                // Roll back records made for texts that did not get written.
                var restore: [DeliveryPipeline.SessionKey: UInt64] = [:]
                for item in batch[taken..<recorded] {
                    let key = DeliveryPipeline.SessionKey(device: item.device, session: item.session)
                    restore[key] = before[key] ?? 0
                }
                for item in batch[0..<taken] {
                    let key = DeliveryPipeline.SessionKey(device: item.device, session: item.session)
                    if restore[key] != nil { restore[key] = item.chunk.seq }
                }
                for (key, seq) in restore {
                    try? progress.record(sink: label, device: key.device, session: key.session, seq: seq)
                }
            }
            return (taken, error.message)
        }
    }
}

extension DeliveryPipeline {
    /// Caller holds no pipeline lock; takes it briefly.
    func sinkLevelUnlocked(_ label: String, _ key: SessionKey) -> UInt64? {
        condition.withLock { sinkLevels[label]?[key] }
    }
}
