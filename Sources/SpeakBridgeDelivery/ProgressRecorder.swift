import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore

/// A sink runner's progress records for one batch (`SinkRunner.deliver`): which items are recorded so far, and
/// each session's progress before the batch's first record of it (for a class-(a) rollback).
///
/// Why a value with mutating methods: the runner's `willWrite`/`didWrite` closures go through the `Sink`
/// existential, so the locals a nested function captured were boxed and every read or write of them was a
/// dynamic exclusivity check (eight per paced line, about 70 instructions each). One `inout` access per record
/// call replaces them.
struct ProgressRecorder {
    typealias Before = (device: DeviceID, session: String, seq: UInt64)

    let batch: [SinkItem]
    let label: String
    let progress: ProgressLog
    /// Items `batch[..<recorded]` are recorded.
    private(set) var recorded = 0
    /// The log's slot of the last record (see `ProgressSlot`), handed back to the next record.
    private(set) var slot: ProgressSlot?
    /// The first session inline and the rest in a list, not a dictionary: a batch is one device's items, nearly
    /// always of one session (at most `SinkRunner.batchLimit`), so a paced line allocates nothing here.
    private var firstBefore: Before?
    private var moreBefore: [Before] = []

    init(batch: [SinkItem], label: String, progress: ProgressLog, slot: ProgressSlot?) {
        self.batch = batch
        self.label = label
        self.progress = progress
        self.slot = slot
    }

    /// The session's recorded progress before this batch's first record of it; nil when the batch recorded none.
    func levelBefore(_ item: SinkItem) -> UInt64? {
        if let first = firstBefore, first.session == item.session, first.device == item.device { return first.seq }
        return moreBefore.first { $0.session == item.session && $0.device == item.device }?.seq
    }

    /// Records the last seq of each run of one (device, session) in `batch[recorded..<k]` (as `report` does).
    mutating func record(through k: Int) throws(StoreError) {
        guard k > recorded else { return }
        var start = recorded
        while start < k {
            let first = batch[start]
            var end = start + 1
            while end < k, batch[end].session == first.session, batch[end].device == first.device { end += 1 }
            let key = ProgressLog.Key(sink: label, device: first.device, session: first.session)
            let (recordedSlot, previous) = try progress.record(key, seq: batch[end - 1].chunk.seq, cached: slot)
            slot = recordedSlot
            if levelBefore(first) == nil {
                let entry: Before = (first.device, first.session, previous ?? 0)
                if firstBefore == nil { firstBefore = entry } else { moreBefore.append(entry) }
            }
            start = end
        }
        recorded = k
    }
}
