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

extension DeliveryPipeline {
    /// Caller holds no pipeline lock; takes it briefly.
    func sinkLevelUnlocked(_ label: String, _ key: SessionKey) -> UInt64? {
        condition.withLock { sinkLevels[label]?[key] }
    }
}
