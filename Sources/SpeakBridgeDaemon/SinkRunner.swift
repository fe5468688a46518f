import Foundation
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore
import SpeakBridgeSupport

/// One sink's thread: waits for readiness, records progress right before each write, writes, reports.
/// Its queue is bounded by the pipeline's backlog rule (`BacklogMeter`): the daemon stops reading a device that
/// is over the high-water mark and refuses its messages above the hard limit. It is fair between devices
/// (`FairQueue`): one device's backlog never sits in front of another device's line.
// `@unchecked Sendable` is sound: `queue`, `stopped`, `busy` and `currentProblem` are guarded by `condition`.
final class SinkRunner: @unchecked Sendable {
    let sink: any Sink
    let progress: ProgressLog
    unowned let pipeline: DeliveryPipeline
    let condition = NSCondition()
    var queue = FairQueue<DeviceID, DeliveryPipeline.Item>()
    var stopped = false
    /// A delivery is in progress (on the runner thread or inline); guarded by `condition`.
    var busy = false
    var currentProblem: String?
    static let batchLimit = 256
    static let batchBytes = 64 << 10
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
    var queuedCount: Int { condition.withLock { queue.count } }

    /// `items` are one message's chunks: one device, one session, ascending.
    func enqueue(_ items: [DeliveryPipeline.Item]) {
        guard let first = items.first else { return }
        // Skip what this sink already took (it may be ahead of the ack level after a restart); skipped chunks
        // count as taken by this sink for the backlog.
        let key = DeliveryPipeline.SessionKey(device: first.device, session: first.session)
        let fresh: [DeliveryPipeline.Item]
        if let level = pipeline.sinkLevelUnlocked(sink.label, key), first.chunk.seq <= level {
            fresh = items.filter { $0.chunk.seq > level }
            let skipped = items.prefix { $0.chunk.seq <= level }
            let bytes = skipped.reduce(UInt64(0)) { $0 &+ UInt64($1.chunk.text.utf8.count) }
            pipeline.sinkTook(sink.label, [first.device: .init(chunks: UInt64(skipped.count), bytes: bytes)])
        } else {
            fresh = items
        }
        guard !fresh.isEmpty else { return }
        let inline: [DeliveryPipeline.Item]? = condition.withLock {
            if writesInline && !busy && !stopped && queue.isEmpty && fresh.count <= Self.batchLimit {
                busy = true
                return fresh
            }
            queue.append(first.device, fresh)
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
            queue.append(first.device, batch[taken...])  // the queue was empty: these stay first
            busy = false
            condition.signal()
        }
    }

    func report(_ batch: [DeliveryPipeline.Item], taken: Int) {
        guard taken > 0 else { return }
        var levels: [DeliveryPipeline.SessionKey: UInt64] = [:]
        var counts: [DeviceID: BacklogMeter.Level] = [:]
        for item in batch[0..<taken] {
            levels[DeliveryPipeline.SessionKey(device: item.device, session: item.session)] = item.chunk.seq
            var level = counts[item.device] ?? BacklogMeter.Level()
            level.chunks &+= 1
            level.bytes &+= UInt64(item.chunk.text.utf8.count)
            counts[item.device] = level
        }
        pipeline.sinkAdvanced(sink.label, levels, counts: counts)
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
            while (queue.isEmpty || busy) && !stopped { condition.wait() }
            if stopped {
                condition.unlock()
                sink.close()
                return
            }
            // One device's items, at most `batchLimit` texts and about `batchBytes` bytes: a sink that takes only a
            // pipe's worth per call (a FIFO whose reader is slow) must not re-frame megabytes per 64 KiB written.
            guard let (device, batch) = queue.next(limit: Self.batchLimit, budget: Self.batchBytes,
                                                   weight: { $0.chunk.text.utf8.count }) else {
                condition.unlock()
                continue
            }
            busy = true
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
                queue.consume(device, taken: taken, of: batch.count)
            }
            report(batch, taken: taken)
            // A failing sink is retried after a pause, so it is not hammered. Not a FIFO: a full pipe is waited for
            // by `waitUntilReady` (poll), which returns the moment the reader made room; a fixed 200 ms sleep there
            // held every device's lines whenever a fast reader fell behind for an instant.
            if taken == 0 && problem != nil && !writesInline {
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
            Console.debug("\(label): wrote \(batch.count) text(s)")
            return (batch.count, nil)
        } catch {
            let taken = min(error.delivered, batch.count)
            // Logged once per distinct failure (a failing sink is retried every 200 ms), never with the text.
            if error.message != problem {
                Console.warning("sink \(label): \(error.message)" + (error.hint.map { " (\($0))" } ?? ""))
            }
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
