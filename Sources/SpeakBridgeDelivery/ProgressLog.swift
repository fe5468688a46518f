#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
public import SpeakBridgeProtocol
public import SpeakBridgeStore
import SpeakBridgeSupport
import Synchronization

/// The desktop's durable delivery progress: for each (sink, device, session), the last sequence number that sink
/// has been handed — recorded right before the write for class-(a) sinks, right after it for class (b); class-(c)
/// sinks keep their own (`DeliveryClass`) — and for each retired (device, session), its ack level. An append-only log of JSON lines, replayed
/// in order on open (the last line for a key wins):
/// - `["sink","DEVICE-ID","session",seq]`: that sink's progress (makes the session live again if it was retired);
/// - `["","DEVICE-ID","session",seq]`: the session was retired at ack level `seq` (its sink lines are dropped);
/// - `["","DEVICE-ID","",0]`: the device was revoked (everything of it is dropped).
/// The lines are followed by zero padding: the file is a `LogFile` (records written in place with pwrite(2), its
/// size ahead of them). `record` is one pwrite(2) (survives the process being killed at once); `sync` is the
/// fdatasync (an fsync after the file grew) that makes everything recorded so far survive a power cut, and the
/// desktop acks only after it. Each live key is a `ProgressSlot` (its line's fixed part encoded once); a caller
/// that records one key again and again passes the slot back. An old log without padding loads the same (every
/// open rewrites the log, with padding).
///
/// Compaction (on open, and in `sync` once 8 MiB were appended) is O(entries) and never holds the lock while it
/// writes: the state is copied under the lock (as values, O(entries): the slots keep changing), written to a new
/// file outside it while records keep going to the old file and to a small in-memory tail, then the tail is
/// appended and the new file renamed in place under the lock.
public final class ProgressLog: @unchecked Sendable {
    public struct Key: Hashable, Sendable {
        public var sink: String
        public var device: DeviceID
        public var session: String
    }

    /// device → session → sink → seq.
    typealias Values = [DeviceID: [String: [String: UInt64]]]
    /// device → session → sink → slot (each `attached`).
    typealias Live = [DeviceID: [String: [String: ProgressSlot]]]
    /// device → session → ack level.
    typealias Retired = [DeviceID: [String: UInt64]]

    let path: String
    // `@unchecked Sendable` is sound: every mutable field below is read and written only with `lock` held.
    let lock = ThreadLock()
    var file: LogFile
    var live: Live = [:]
    var retired: Retired = [:]
    /// Devices revoked through the pipeline (`forget(device:generation:)`): a record of an item accepted before
    /// its device's revocation is not made, so a sink finishing such an item cannot bring the device back.
    var revocations = Revocations()
    /// `revocations.count`, readable without an exclusivity check (a `let`): a record accepted since the last
    /// revocation, every record but in the moment of one, is not stale. Written under `lock`.
    let revocationCount = Atomic<UInt64>(0)
    var appendedBytes = 0
    /// Lines recorded while a compaction writes its snapshot; nil when none runs.
    var tail: [UInt8]?
    /// The line being recorded (its capacity reused: no allocation per record).
    var scratch: [UInt8] = []
    /// Serializes `sync` (and so `compact`, the only place `file` changes outside init).
    let syncGate = Locked(())
    /// Guarded by `lock`; a test lowers it.
    var compactAfterBytes = 8 << 20
    /// Lines appended since open, and how many of them the last successful `sync` covered, with the number of
    /// syncs: what the group-commit tests check acks against. Guarded by `lock`.
    var appendedLines = 0
    var syncedLines = 0
    var syncs = 0
    /// A sync of `file` failed: it is not synced again but rewritten (`sync`). Guarded by `lock`.
    var mustRewrite = false

    public init(path: String) throws(StoreError) {
        self.path = path
        let values: Values
        (values, retired) = try Self.load(path)
        file = try LogFile.create(path, records: Self.snapshot(values, retired), extents: LogFile.progressExtents)
        for (device, sessions) in values {
            for (session, sinks) in sessions {
                for (sink, seq) in sinks {
                    let slot = ProgressSlot(Key(sink: sink, device: device, session: session))
                    slot.seq = seq
                    slot.attached = true
                    live[device, default: [:]][session, default: [:]][sink] = slot
                }
            }
        }
    }

    public func progress(sink: String, device: DeviceID, session: String) -> UInt64? {
        lock.withLock { live[device]?[session]?[sink]?.seq }
    }

    /// Every live (sink, device, session) with its recorded progress.
    public func entries() -> [Key: UInt64] {
        lock.withLock {
            var out: [Key: UInt64] = [:]
            for (_, sessions) in live {
                for (_, sinks) in sessions {
                    for (_, slot) in sinks { out[slot.key] = slot.seq }
                }
            }
            return out
        }
    }

    /// The live state as values (a copy taken under `lock`, for a snapshot written outside it). O(entries).
    func values() -> Values {
        live.mapValues { $0.mapValues { $0.mapValues(\.seq) } }
    }

    /// (full fsyncs, fdatasyncs) of the current file, for tests.
    var syncKinds: (full: Int, data: Int) { lock.withLock { file }.syncCounts }

    /// (fsyncs done, lines the last one made durable), for tests of the group commit.
    var syncStatus: (syncs: Int, durableLines: Int) { lock.withLock { (syncs, syncedLines) } }

    /// Every retired (device, session) with its ack level.
    public func retiredEntries() -> [DeviceID: [String: UInt64]] { lock.withLock { retired } }

    public func record(sink: String, device: DeviceID, session: String, seq: UInt64) throws(StoreError) {
        _ = try record(Key(sink: sink, device: device, session: session), seq: seq, cached: nil)
    }

    /// Records `seq` for `key` (one pwrite(2)). `cached`: the slot an earlier call returned, when it may be the
    /// same key (checked here; a detached or other slot is looked up again). Returns the key's slot, to pass next
    /// time, and the seq recorded for it before (nil: none was live).
    /// `generation`: the item's `SinkItem.generation` (the default, for callers outside the pipeline, is never
    /// stale); an item of a device revoked since is not recorded (nil `previous`).
    public func record(_ key: Key, seq: UInt64, cached: ProgressSlot?, generation: UInt64 = .max) throws(StoreError)
        -> (slot: ProgressSlot, previous: UInt64?) {
        // The empty label marks retirements: nothing is recorded for it.
        guard !key.sink.isEmpty else { return (cached ?? ProgressSlot(key), nil) }
        lock.lock()
        defer { lock.unlock() }
        if revocationCount.load(ordering: .relaxed) > generation, revocations.isStale(key.device, generation: generation) {
            return (cached ?? ProgressSlot(key), nil)
        }
        let slot: ProgressSlot
        if let cached, cached.attached, cached.matches(sink: key.sink, device: key.device, session: key.session) {
            slot = cached
        } else if let found = live[key.device]?[key.session]?[key.sink] {
            slot = found
        } else if let cached, cached.matches(sink: key.sink, device: key.device, session: key.session) {
            slot = cached  // retired or forgotten since: attached again below
        } else {
            slot = ProgressSlot(key)
        }
        scratch.removeAll(keepingCapacity: true)
        slot.appendLine(seq, to: &scratch)
        try append(scratch)  // nothing changes in memory when the write fails
        Trace.mark("progress", seq)
        let previous = slot.attached ? slot.seq : nil
        slot.seq = seq
        if !slot.attached {
            slot.attached = true
            live[key.device, default: [:]][key.session, default: [:]][key.sink] = slot
            Self.unretire(&retired, key.device, key.session)
        }
        return (slot, previous)
    }

    static func unretire(_ retired: inout Retired, _ device: DeviceID, _ session: String) {
        guard retired[device]?[session] != nil else { return }
        retired[device]?[session] = nil
        if retired[device]?.isEmpty == true { retired[device] = nil }
    }

    /// The session was retired with ack level `delivered`: its per-sink progress is replaced by that level.
    public func retire(device: DeviceID, session: String, delivered: UInt64) throws(StoreError) {
        let line = Self.line("", device, session, delivered)
        lock.lock()
        defer { lock.unlock() }
        try append(line)
        for (_, slot) in live[device]?[session] ?? [:] { slot.attached = false }
        live[device]?[session] = nil
        if live[device]?.isEmpty == true { live[device] = nil }
        retired[device, default: [:]][session] = delivered
    }

    /// Forgets a device (after revocation): one appended line, dropped at the next compaction.
    /// `generation`: the pipeline's revocation count for this revocation (0: none), below which a later record of
    /// the device is an item accepted before it and is not made (see `record`).
    public func forget(device: DeviceID, generation: UInt64 = 0) throws(StoreError) {
        let line = Self.line("", device, "", 0)
        lock.lock()
        defer { lock.unlock() }
        if generation > 0 {
            revocations.adopt(device, at: generation)
            revocationCount.store(revocations.count, ordering: .relaxed)
        }
        try append(line)
        for (_, sinks) in live[device] ?? [:] {
            for (_, slot) in sinks { slot.attached = false }
        }
        live[device] = nil
        retired[device] = nil
    }

    /// Caller holds `lock`.
    func append(_ line: [UInt8]) throws(StoreError) {
        try file.append(line)
        appendedBytes += line.count
        appendedLines += 1
        tail? += line
    }

    /// Makes every record so far durable; compacts the log when it has grown. The sync (an fdatasync; a full fsync
    /// after the file grew) runs without holding `lock`, so sinks keep recording (and writing) while the disk
    /// catches up; so does growing the file ahead of the records when little room is left (`LogFile.growAhead`:
    /// the grow's zeros go out with this sync, and a record rarely waits for a grow). A grow that fails (a full
    /// disk) does not fail the sync: the records fit in the room the file already has; only a record that does
    /// not fit fails (`record` throws "cannot grow PATH: No space left on device"). Calls are serialized by
    /// `syncGate` (one compaction at a time; a non-nil `tail` marks it).
    ///
    /// A failed sync is never retried on the same file: on Linux a failed writeback marks its pages clean and
    /// reports the error once per descriptor, so a second fsync returns 0 although the records never reached the
    /// disk. It marks the file untrusted (`mustRewrite`) and throws; every later `sync` is then a compaction — the
    /// in-memory state written to a new file, fsynced, renamed over the log, the directory fsynced (`compact`) —
    /// until one succeeds. Only that success (a return from here) lets the caller acknowledge anything.
    public func sync() throws(StoreError) {
        try syncGate.withLock { _ throws(StoreError) in
            lock.lock()
            let rewrite = mustRewrite
            if (rewrite || appendedBytes > compactAfterBytes) && tail == nil {
                let state = (values(), retired)
                tail = []
                let covered = appendedLines
                lock.unlock()
                switch compact(state) {
                case .durable:
                    // Everything appended before the snapshot is in the new file (fsynced); the tail too.
                    lock.withLock {
                        mustRewrite = false
                        syncedLines = max(syncedLines, covered)
                        syncs += 1
                    }
                    return
                case .replacedUnsynced(let error):
                    lock.withLock { mustRewrite = true }
                    throw error
                case .kept(let error):
                    // The old log is in place, untouched. After a failed sync it cannot be trusted: fail again.
                    if rewrite { throw error }
                }
                lock.lock()
            }
            // `file` is replaced only by `compact`, which runs only here, under `syncGate`; and this reference keeps
            // its descriptor open anyway until the sync returns.
            let handle = file
            let covered = appendedLines
            lock.unlock()
            // Ahead of need only: the records it is to sync are all inside the file (an append grows first, and
            // fails itself when it cannot), so a failed grow (a full disk) must not fail their sync and hold back
            // the acks. A record that does not fit fails in `record`, with the grow's error.
            try? handle.growAhead()
            do throws(StoreError) {
                try handle.sync()
            } catch {
                lock.withLock { mustRewrite = true }
                throw error
            }
            lock.withLock {
                syncedLines = covered
                syncs += 1
            }
        }
    }

    /// How a compaction ended.
    enum Compaction {
        /// The new file replaced the log, and it and its directory are fsynced.
        case durable
        /// The log is as it was (the new file could not be written or synced, or not renamed).
        case kept(StoreError)
        /// The new file replaced the log, but its last sync (the tail) or the directory's failed.
        case replacedUnsynced(StoreError)
    }

    /// Writes `state` and a zero extent to a new file (outside the lock), then under the lock writes what was
    /// recorded meanwhile after the snapshot and renames it over the log. The new file is fsynced before the
    /// rename (a power cut leaves the old log or a complete new one) and again after (the tail), then the directory
    /// (the rename). `.kept` when it failed before the rename: the old log stays, nothing lost.
    func compact(_ state: (Values, Retired)) -> Compaction {
        let temp = path + ".compact"
        let bytes = Self.snapshot(state.0, state.1)
        let padding = LogFile.progressExtents.minimum
        unlink(temp)
        // O_EXCL|O_NOFOLLOW: never write through a planted file or link.
        let newFD = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        var failure: StoreError? = newFD >= 0 ? nil : .io("create", temp, errno: errno)
        if newFD >= 0 {
            do throws(StoreError) {
                try FileIO.writeAll(newFD, bytes, at: 0, path: temp)
                try FileIO.writeZeros(newFD, from: bytes.count, to: bytes.count + padding, path: temp)
                guard fsync(newFD) == 0 else { throw StoreError.io("sync", temp, errno: errno) }
            } catch { failure = error }
            if failure != nil { close(newFD) }
        }
        // Takes the descriptor over (closes it when dropped), at its size now: records, then the zeros.
        let newFile = failure == nil ? LogFile.adopt(newFD, path: path, end: bytes.count, extents: LogFile.progressExtents) : nil
        lock.lock()
        let pending = tail ?? []
        tail = nil
        if let newFile, failure == nil {
            do throws(StoreError) { try newFile.append(pending) } catch { failure = error }
            if failure == nil && rename(temp, path) != 0 { failure = .io("replace", path, errno: errno) }
        }
        guard failure == nil, let newFile else {
            appendedBytes = 0  // try again after as many bytes more, not on every sync
            lock.unlock()
            unlink(temp)
            return .kept(failure ?? .io("create", temp, errno: EIO))
        }
        file = newFile  // the old file's descriptor closes with its last reference (`sync` runs only under `syncGate`)
        appendedBytes = pending.count
        lock.unlock()
        do throws(StoreError) {
            try newFile.sync()
            guard FileIO.syncDirectory(of: path) else { throw StoreError.io("sync", path, errno: errno) }
        } catch {
            return .replacedUnsynced(error)
        }
        return .durable
    }

    static func line(_ sink: String, _ device: DeviceID, _ session: String, _ seq: UInt64) -> [UInt8] {
        JSONValue.array([.string(sink), .string(device.description), .string(session),
                         .integer(Int64(clamping: seq))]).encoded() + [0x0A]
    }

    /// O(entries), no sorting: retired lines first, so that a live line for the same session (there is none in a
    /// consistent state) would win on replay.
    static func snapshot(_ live: Values, _ retired: Retired) -> [UInt8] {
        var out: [UInt8] = []
        for (device, sessions) in retired {
            for (session, seq) in sessions { out += line("", device, session, seq) }
        }
        for (device, sessions) in live {
            for (session, sinks) in sessions {
                for (sink, seq) in sinks { out += line(sink, device, session, seq) }
            }
        }
        return out
    }

    static func load(_ path: String) throws(StoreError) -> (Values, Retired) {
        guard let bytes = try FileIO.read(path) else { return ([:], [:]) }
        var live: Values = [:]
        var retired: Retired = [:]
        var devices: [String: DeviceID] = [:]  // parsed once per device, not once per line
        // A torn last line (killed mid-write, maybe followed by zeros) is ignored: it was never acknowledged. So is
        // any line that is not a record (corrupt, or cut by NUL bytes: `LogFile.lines`).
        for line in LogFile.lines(bytes) {
            guard let v = try? JSONValue.parse(Array(line)), let a = v.arrayValue, a.count == 4,
                  let sink = a[0].stringValue, let text = a[1].stringValue,
                  let dev = devices[text] ?? (try? DeviceID(parsing: text)), let session = a[2].stringValue, let seq = a[3].int64Value, seq >= 0 else { continue }
            devices[text] = dev
            switch (sink.isEmpty, session.isEmpty) {
            case (false, _):
                live[dev, default: [:]][session, default: [:]][sink] = UInt64(seq)
                unretire(&retired, dev, session)
            case (true, false):
                live[dev]?[session] = nil
                retired[dev, default: [:]][session] = UInt64(seq)
            case (true, true):
                live[dev] = nil
                retired[dev] = nil
            }
        }
        for (dev, sessions) in live where sessions.isEmpty { live[dev] = nil }
        return (live, retired)
    }
}
