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
/// Backpressure: `submit` and the runners' reports keep a `BacklogMeter` (per device: handed to the sinks, not
/// yet taken by all) under the same lock, with no extra thread hop; `submit` answers `.pause` above the
/// high-water mark and `onDrained` fires (on the committer's or a runner's thread) when a paused device fell to
/// the low-water mark.
// `@unchecked Sendable` is sound: every mutable field is guarded by `condition` (runners are set once in init).
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
    struct DrainedHandler: Sendable { let call: @Sendable ([DeviceID]) -> Void }

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
    var meter: BacklogMeter
    let onDrained: DrainedHandler
    /// Sink label → index in the meter.
    let sinkIndex: [String: Int]

    init(sinks: [any Sink], progress: ProgressLog, limits: BacklogMeter.Limits = .desktop,
         onDurable: @escaping @Sendable ([(SessionKey, UInt64)]) -> Void,
         onDrained: @escaping @Sendable ([DeviceID]) -> Void) {
        self.progress = progress
        self.onDurable = DurableHandler(call: onDurable)
        self.onDrained = DrainedHandler(call: onDrained)
        let labels = sinks.map(\.label)
        meter = BacklogMeter(sinks: labels.count, limits: limits)
        sinkIndex = Dictionary(labels.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
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

    /// Every (device, session) ack level, for seeding the ledgers at start.
    func durableLevels() -> [SessionKey: UInt64] { condition.withLock { durable } }

    /// The progress a sink starts from for a session it has not seen in this run.
    func level(sink: String, key: SessionKey) -> UInt64? {
        condition.withLock { sinkLevels[sink]?[key] }
    }

    /// Hands accepted chunks to every sink. Counted in the backlog first (a sink that writes inline reports them
    /// taken before this returns). `.pause`: the device is over its high-water mark.
    func submit(device: DeviceID, session: String, chunks: [Chunk]) -> BacklogMeter.Pressure {
        guard !chunks.isEmpty else { return .normal }
        let bytes = chunks.reduce(UInt64(0)) { $0 &+ UInt64($1.text.utf8.count) }
        let pressure = condition.withLock { meter.submit(device, chunks: UInt64(chunks.count), bytes: bytes) }
        let items = chunks.map { Item(device: device, session: session, chunk: $0) }
        for runner in runners { runner.enqueue(items) }
        return pressure
    }

    /// At or above the hard limit: the caller must not accept more of this device now.
    func isOverflowing(_ device: DeviceID) -> Bool { condition.withLock { meter.isOverflowing(device) } }

    func isThrottled(_ device: DeviceID) -> Bool { condition.withLock { meter.isThrottled(device) } }

    func undelivered(_ device: DeviceID) -> BacklogMeter.Level { condition.withLock { meter.undelivered(device) } }

    /// A sink took (or skipped as already taken) `count` chunks of `device`, `bytes` of text.
    func sinkTook(_ label: String, _ counts: [DeviceID: BacklogMeter.Level]) {
        guard let index = sinkIndex[label], !counts.isEmpty else { return }
        let drained: [DeviceID] = condition.withLock {
            counts.compactMap { device, level in
                meter.taken(device, sink: index, chunks: level.chunks, bytes: level.bytes) ? device : nil
            }
        }
        if !drained.isEmpty { onDrained.call(drained) }
    }

    /// Called by a runner after its sink took `levels` (`counts`: how much of each device that was).
    func sinkAdvanced(_ label: String, _ levels: [SessionKey: UInt64], counts: [DeviceID: BacklogMeter.Level] = [:]) {
        condition.lock()
        for (key, seq) in levels {
            sinkLevels[label, default: [:]][key] = max(sinkLevels[label]?[key] ?? 0, seq)
            let all = sinkLevels.values.map { $0[key] ?? 0 }.min() ?? seq
            if all > (durable[key] ?? 0), all > (pendingDurable[key] ?? 0) { pendingDurable[key] = all }
        }
        if !pendingDurable.isEmpty { condition.broadcast() }
        condition.unlock()
        sinkTook(label, counts)
    }

    /// A retired session: nothing of it is in flight (the ledger retires only those), so its levels go.
    func retire(_ key: SessionKey) {
        condition.withLock {
            for label in sinkLevels.keys { sinkLevels[label]?[key] = nil }
            durable[key] = nil
            pendingDurable[key] = nil
        }
    }

    /// A revoked device: drops its levels. O(sessions), on revocation only.
    func forget(_ device: DeviceID) {
        condition.withLock {
            for label in sinkLevels.keys { sinkLevels[label] = sinkLevels[label]?.filter { $0.key.device != device } }
            durable = durable.filter { $0.key.device != device }
        }
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
