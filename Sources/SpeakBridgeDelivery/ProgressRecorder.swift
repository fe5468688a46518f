import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore

/// A sink runner's progress records for one batch (`SinkRunner.deliver`): which items are recorded so far, and
/// each session's progress before the batch's first record of it (for a class-(a) rollback).
///
/// Why a value with mutating methods: the runner's `willWrite`/`didWrite` closures go through the `Sink`
/// existential, so the locals a nested function captured were boxed and every read or write of them was a
/// dynamic exclusivity check (eight per paced line, about 70 instructions each). One `inout` access per record
/// call replaces them. The batch, label and log are passed in, and a session is named by the index of its first
/// recorded item, so the value holds two references (its copy into the closures' box retains only those).
struct ProgressRecorder {
    /// Items `batch[..<recorded]` are recorded.
    private(set) var recorded = 0
    /// The log's slot of the last record (see `ProgressSlot`), handed back to the next record.
    private(set) var slot: ProgressSlot?
    /// (index in the batch of the session's first recorded item, the session's level before it). The first
    /// session inline and the rest in a list, not a dictionary: a batch is one device's items, nearly always of
    /// one session (at most `SinkRunner.batchLimit`), so a paced line allocates nothing here.
    private var first: (index: Int, seq: UInt64)?
    private var more: [(index: Int, seq: UInt64)] = []

    init(slot: ProgressSlot?) {
        self.slot = slot
    }

    /// The session's recorded progress before this batch's first record of it; nil when the batch recorded none.
    func levelBefore(_ item: SinkItem, in batch: [SinkItem]) -> UInt64? {
        func same(_ index: Int) -> Bool { batch[index].isSameSession(as: item) }
        if let first, same(first.index) { return first.seq }
        return more.first { same($0.index) }?.seq
    }

    /// Records the last seq of each run of one (device, session) in `batch[recorded..<k]` (as `report` does).
    mutating func record(through k: Int, of batch: [SinkItem], sink label: String,
                         into progress: ProgressLog) throws(StoreError) {
        guard k > recorded else { return }
        var start = recorded
        while start < k {
            let item = batch[start]
            var end = start + 1
            while end < k, batch[end].isSameSession(as: item) { end += 1 }
            let key = ProgressLog.Key(sink: label, device: item.device, session: item.session)
            let (recordedSlot, previous) = try progress.record(key, seq: batch[end - 1].seq, cached: slot,
                                                               generation: item.generation)
            slot = recordedSlot
            if levelBefore(item, in: batch) == nil {
                if first == nil { first = (start, previous ?? 0) } else { more.append((start, previous ?? 0)) }
            }
            start = end
        }
        recorded = k
    }
}
