#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeSupport

/// The client's journal of chunks not yet acknowledged by one desktop: `state/outbox/<DESKTOP-ID>.journal`.
///
/// JSON lines: a header `{"session":"…","acked":N,"reserved":R,"boot":"…"}`, then `{"c":{chunk}}` for every chunk,
/// `{"a":N}` for every cumulative ack and `{"r":R,"b":"…"}` for every reservation (below), and after an
/// `outbox release` a `{"released":"FILE"}` per held file whose lines it queued here (`queueReleased`), then zero
/// padding: a `LogFile` (records written in place with pwrite(2), synced with fdatasync(2) while the size stays).
/// A chunk is written (one pwrite(2)) before it is sent, so killing `send` at any point loses nothing it accepted;
/// the next `send` resends what the desktop has not acknowledged, and the desktop drops what it already has. `sync`
/// is batched by the caller. The file is compacted on open when it is large or its last line torn
/// (`compactAbove`), or when it names released held files (once they are settled), and an exclusive flock keeps two
/// `send` processes from interleaving.
/// An old journal without padding loads the same and gets its padding on open.
///
/// Reservations: `send` does not fsync the record of a chunk the desktop acknowledged in time (its copy is durable:
/// Sender+Clock.swift), so a crash of this machine can take such records with it, and the journal's highest
/// sequence number can then be below what the desktop has; numbering new chunks after it would reuse numbers the
/// desktop drops as duplicates. So sequence numbers are reserved ahead, durably: before a chunk above `reserved` is
/// journaled, a record `{"r":R,"b":BOOT}` (R = its number + `reservationStep`, BOOT this boot's ID) is written and
/// fsynced. Every number ever journaled (so ever sent) is ≤ the last reservation on disk. A journal whose last
/// reservation was made in an earlier boot may have lost records in a crash since, so its next chunk is numbered
/// after the reservation (a forward jump, which the desktop accepts: PROTOCOL.md); in the same boot nothing was lost
/// (a killed process loses no written record) and numbering goes on after the last chunk. One fsync per
/// `reservationStep` chunks, and one at the first chunk after a reboot.
///
/// `@unchecked Sendable` is sound: an Outbox has one owner that calls it from one serial context at a time (`send`'s
/// queue; the main thread of the `outbox` commands), never concurrently; the sync that runs elsewhere calls only
/// `log.sync()` (`LogFile` is `Sendable`: its state is behind its own lock).
public final class Outbox: @unchecked Sendable {
    public let session: String
    public private(set) var acked: UInt64
    /// The chunks of earlier runs that were not acknowledged when this journal was opened. Not kept up to date
    /// afterwards: the caller's window owns the live list (keeping a second copy current cost an array shift per
    /// ack, quadratic in a burst).
    public let pending: [Chunk]
    public private(set) var nextSeq: UInt64
    /// Every sequence number journaled so far is ≤ this, durably (see Reservations), as reserved in `reservedBoot`.
    public private(set) var reserved: UInt64
    private(set) var reservedBoot: String
    /// This boot's ID (`currentBoot`).
    let boot: String
    /// `reserved` was made in this boot: no crash since could have taken a record, numbering goes on after the last
    /// chunk.
    var reservedThisBoot: Bool { reservedBoot == boot }
    let path: String
    /// The journal's file; another thread may `sync()` it while the owner appends (`send`'s `JournalSyncer`, handed
    /// the current one with each request). Replaced only by `rewrite`, on the owner's context.
    public private(set) var log: LogFile
    /// Held for the life of this object: a separate file, because compaction replaces the journal's inode.
    let lockFD: Int32

    /// Opens (creating if needed) the journal for `desktop`; blocks while another process holds it,
    /// calling `waiting` once.
    /// `boot`: this boot's ID (tests give another to stand for a reboot); when it cannot be told (empty), a token of
    /// this process stands for it: every run then counts as a new boot (a jump of the numbering and one reservation
    /// per run, never a reuse).
    public init(home: Home, desktop: DeviceID, boot: String = Outbox.currentBoot(),
                waiting: () -> Void = {}) throws(StoreError) {
        try home.prepare()
        path = home.outboxDirectory + "/" + desktop.compact + ".journal"
        lockFD = try Self.lock(path, wait: true, waiting: waiting)
        let loaded: Loaded
        do { loaded = try Self.load(path) } catch { close(lockFD); throw error }
        session = loaded.session ?? Self.newSessionID()
        acked = loaded.acked
        pending = loaded.chunks.filter { $0.seq > loaded.acked }
        self.boot = boot.isEmpty ? "unknown-" + Hex.encode(SecureRandom.bytes(8)) : boot
        reserved = loaded.reserved
        // The same string as `boot` when equal: `reservedThisBoot`, asked at every append, is then an identity check.
        reservedBoot = loaded.reservedBoot == self.boot ? self.boot : loaded.reservedBoot
        let last = max(acked, pending.last?.seq ?? 0)
        // After a reboot the journal may have lost records a crash took (see Reservations): go on after the
        // reservation, which no number ever journaled passed.
        nextSeq = (reservedBoot == self.boot ? last : max(last, reserved)) + 1
        do throws(StoreError) {
            // Held files this journal names as released (an `outbox release` queued their lines here) are removed
            // if a crash left them, and the directory fsynced; then the names can go with a compaction (below).
            if !loaded.released.isEmpty { try OutboxShelf.settleReleased(loaded.released, journal: path) }
            if loaded.released.isEmpty && loaded.session != nil && loaded.records <= Self.compactAbove
                && loaded.endsWithNewline
                && loaded.size <= Self.compactAbove + LogFile.journalExtents.maximum {
                // Small and whole: written to as it is (an old file without padding gets it here). Rewriting it
                // cost two fsyncs (file and directory) at every start, two of a one-shot `send --text`'s five; the
                // records already there load the same either way.
                log = try LogFile.open(path, end: loaded.records, extents: LogFile.journalExtents)
            } else {
                // Compact: header + unacknowledged chunks, atomically. Also when the last line is torn (killed
                // mid-write): writing after it would glue the next record onto the torn one; when the file is
                // far larger than its records (its padding is cut back to one extent); and once its released
                // names are settled (they are not needed any more: the first open after a release pays this).
                do throws(StoreError) {
                    log = try LogFile.create(path, records: Self.records(session: session, acked: acked,
                                                                         reserved: (reserved, reservedBoot), pending),
                                             extents: LogFile.journalExtents)
                } catch {
                    // A compaction is for speed and room; on a full disk its new file cannot be written. A whole
                    // journal (its session header there, its last line ended) is used as it is then: `send`
                    // starts, resends what is pending, and holds new input until the journal takes it (a torn
                    // last line cannot be written after, so that one still fails).
                    guard loaded.session != nil, loaded.endsWithNewline else { throw error }
                    log = try LogFile.open(path, end: loaded.records, extents: LogFile.journalExtents)
                }
            }
        } catch {
            close(lockFD)
            throw error
        }
    }

    /// Takes the exclusive lock that guards `path` (a journal: live or held, every file of one desktop shares the
    /// live journal's lock). With `wait` false, returns nil when another process holds it.
    static func lock(_ path: String, wait: Bool, waiting: () -> Void = {}) throws(StoreError) -> Int32 {
        let fd = try FileIO.openAppend(path + ".lock")
        if !lockSoon(fd) {
            guard wait else {
                close(fd)
                throw StoreError.outboxBusy(path)
            }
            waiting()
            guard flock(fd, LOCK_EX) == 0 else {
                let e = errno
                close(fd)
                throw .io("lock", path, errno: e)
            }
        }
        return fd
    }

    /// Takes the lock without blocking, trying again for up to 100 ms: a lock just let go can still be held for a
    /// moment by another copy of its descriptor — a child this process is spawning holds every descriptor between
    /// fork and exec, O_CLOEXEC ones included (seen: a test's `clear` right after its own journal closed) — and
    /// that is not a running `send`.
    private static func lockSoon(_ fd: Int32) -> Bool {
        for attempt in 0..<20 {
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { return true }
            guard errno == EWOULDBLOCK, attempt < 19 else { return false }
            usleep(5_000)
        }
        return false
    }

    deinit {
        close(lockFD)  // the journal's own descriptor is the log's
    }

    /// Journals new texts as chunks and returns them with their sequence numbers. Each chunk carries its JSON object
    /// as the journal record holds it (`Chunk.encoded`, a slice of the record buffer), so its message copies it
    /// instead of escaping the text again.
    ///
    /// `ack`: the latest acknowledgement not journaled yet, if above `acked` — its record (`markAcked`'s) goes first
    /// in the same pwrite(2), saving the ack's own write. `load` reads it the same either way (an ack record only
    /// raises `acked`; the new chunks are above it), and a kill mid-write can only tear the last line, which `load`
    /// skips: a chunk not sent yet, as before.
    public func append(texts: [String], ack: UInt64 = 0) throws(StoreError) -> [Chunk] {
        try reserveIfNeeded(through: nextSeq &+ UInt64(texts.count) &- 1)
        let withAck = ack > acked
        // The records in one buffer of their exact size (`ackLine`'s, then `chunkLine`'s, one after the other).
        let (out, objects) = MessageCodec.lineRecords(texts, firstSeq: nextSeq, ack: withAck ? ack : nil)
        try log.append(out)
        var chunks: [Chunk] = []
        chunks.reserveCapacity(texts.count)
        for i in texts.indices {
            // Made once `out` is complete, the chunks share its buffer (given earlier, the next write would copy it).
            chunks.append(Chunk(seq: nextSeq &+ UInt64(i), line: texts[i], encodedIn: out, objects[i]))
        }
        nextSeq += UInt64(chunks.count)
        if withAck { acked = ack }
        return chunks
    }

    /// `append(texts:ack:)` for lines read as bytes (`send`'s input, every line plain): the same records and
    /// chunks, each chunk's text kept in the journal record's bytes (no `String` made for a line).
    package func append(lines: PlainLines, ack: UInt64 = 0) throws(StoreError) -> [Chunk] {
        let count = lines.ranges.count
        try reserveIfNeeded(through: nextSeq &+ UInt64(count) &- 1)
        let withAck = ack > acked
        let (out, objects) = MessageCodec.lineRecords(lines, firstSeq: nextSeq, ack: withAck ? ack : nil)
        try log.append(out)
        var chunks: [Chunk] = []
        chunks.reserveCapacity(count)
        for i in 0..<count {
            let text = MessageCodec.plainTextRange(inObject: objects[i], count: lines.ranges[i].count)
            chunks.append(Chunk(seq: nextSeq &+ UInt64(i), lineIn: out, text: text, encoded: objects[i]))
        }
        nextSeq += UInt64(count)
        if withAck { acked = ack }
        return chunks
    }

    /// `append(texts: [text], ack:)` without the arrays: journals one text (one pwrite(2), with the pending ack's
    /// record first if `ack` is above `acked`) and returns its chunk, with its JSON object as journaled
    /// (`Chunk.encoded`).
    public func append(text: String, ack: UInt64 = 0) throws(StoreError) -> Chunk {
        try reserveIfNeeded(through: nextSeq)
        let withAck = ack > acked
        // `ackLine`'s record if any, then `chunkLine`'s, in a buffer of their exact size.
        let (out, object) = MessageCodec.lineRecord(text, seq: nextSeq, ack: withAck ? ack : nil)
        try log.append(out)
        let chunk = Chunk(seq: nextSeq, line: text, encodedIn: out, object)
        nextSeq += 1
        if withAck { acked = ack }
        return chunk
    }

    /// `append(text:ack:)` for a line read as bytes (`lines` holds one plain line): the same record and chunk,
    /// its text kept in the record's bytes.
    package func append(line: PlainLines, ack: UInt64 = 0) throws(StoreError) -> Chunk {
        try reserveIfNeeded(through: nextSeq)
        let withAck = ack > acked
        let (out, object) = MessageCodec.lineRecord(line, seq: nextSeq, ack: withAck ? ack : nil)
        try log.append(out)
        let text = MessageCodec.plainTextRange(inObject: object, count: line.ranges[0].count)
        let chunk = Chunk(seq: nextSeq, lineIn: out, text: text, encoded: object)
        nextSeq += 1
        if withAck { acked = ack }
        return chunk
    }

    /// Sequence numbers reserved at a time (see Reservations): the most a crash can make the numbering jump.
    public static let reservationStep: UInt64 = 1 << 16

    /// Before journaling chunks through `seq`: a reservation record, fsynced, unless one made in this boot covers
    /// them. One branch on the usual path.
    @inline(__always)
    func reserveIfNeeded(through seq: UInt64) throws(StoreError) {
        if seq > reserved || !reservedThisBoot { try reserve(through: seq) }
    }

    @inline(never)  // rare: once per `reservationStep` chunks and once after a reboot
    func reserve(through seq: UInt64) throws(StoreError) {
        let target = seq &+ Self.reservationStep
        try log.append(Self.reservationLine(target, boot))
        try log.sync()
        reserved = target
        reservedBoot = boot
    }

    static func reservationLine(_ reserved: UInt64, _ boot: String) -> [UInt8] {
        JSONValue.object([("r", .integer(Int64(clamping: reserved))), ("b", .string(boot))]).encoded() + [0x0A]
    }

    /// This boot's ID (`/proc/sys/kernel/random/boot_id`, random at every boot). `SPEAKBRIDGE_BOOT_ID` replaces it
    /// for tests, which cannot reboot the machine. Empty if neither can be read (see `init`).
    public static func currentBoot() -> String {
        if let forced = getenv("SPEAKBRIDGE_BOOT_ID") { return String(cString: forced) }
        // procfs reports a size of 0: read(2) into a buffer, not a read of the file's size.
        let fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return "" }
        return String(decoding: buffer[..<n].prefix { $0 != 0x0A }, as: UTF8.self)
    }

    public func markAcked(_ seq: UInt64) throws(StoreError) {
        guard seq > acked else { return }
        var out: [UInt8] = []
        out.reserveCapacity(Self.ackRecordCapacity)
        Self.ackLine(seq, into: &out)
        try log.append(out)
        acked = seq
    }

    /// Room for the longest ack record: `{"a":` (5), 20 digits, `}` and a newline.
    static let ackRecordCapacity = 27

    /// Appends the ack record `{"a":N}` and a newline, written directly: byte for byte what
    /// `JSONValue.object([("a", .integer(N))]).encoded()` gives for every N up to `Int64.max` (a sequence number
    /// never comes near it; a larger one — which that encoding could not hold — is written in full and skipped by
    /// `load`, which costs a resend, nothing else), without the ~2,400 instructions of the generic path a record.
    static func ackLine(_ seq: UInt64, into out: inout [UInt8]) {
        out.append(contentsOf: ackPrefix)
        ASCIIDecimal.append(seq, to: &out)
        out.append(UInt8(ascii: "}"))
        out.append(0x0A)
    }

    static let ackPrefix = Array(#"{"a":"#.utf8)

    /// Cuts a journal whose every chunk is acknowledged back to its header (session, acked), in place, once its
    /// records have grown past `resetAbove`: `send` calls this at a clean exit, so the next start reads one line
    /// instead of every record of this run (loading costs about 10 K instructions a line: after a 50,000-line run,
    /// 0.5 G, over 100 ms before the first dial). The file is truncated and gets the header at offset 0 and one
    /// minimum extent of zeros (`LogFile.rewind`: a burst's padding is given back). The session and its sequence
    /// numbers go on. It is fsynced (one full fsync: the size changed); until then a crash leaves the old
    /// records (all acknowledged: the run's end synced them), an empty file (the next run starts a new session, with
    /// nothing pending) or the header with or without (some of) its zeros, which loses and repeats nothing. Returns
    /// whether it cut.
    /// `acknowledged`: the desktop's ack level, when its record could not be journaled (a full disk: `send` frees
    /// the room of its acknowledged lines this way, which needs no room of its own).
    @discardableResult
    public func resetIfDrained(acknowledged: UInt64 = 0) throws(StoreError) -> Bool {
        let level = max(acked, acknowledged)
        guard level &+ 1 >= nextSeq, log.end > Self.resetAbove else { return false }
        try log.rewind(to: Self.header(session: session, acked: level, reserved: (reserved, reservedBoot)))
        acked = level
        // Synced: later runs do not fsync the records of acknowledged lines, so without it a crash could keep
        // their records (a later page) and lose this header (the first), and the journal would load without its
        // session.
        try log.sync()
        return true
    }

    /// A drained journal larger than this is cut back to its header at a clean exit (`resetIfDrained`).
    public static let resetAbove = 4 * 1024

    /// Replaces the journal with a new file written from memory — the header (with `ack`, if above `acked`) and the
    /// chunks of `unacknowledged` above that level — as `init` compacts it: written and fsynced under a temporary
    /// name, renamed over the journal, the directory fsynced (`FileIO.atomicWrite`: each failure throws). For a
    /// journal whose sync failed: on Linux a failed writeback marks its pages clean and a second fsync of the same
    /// file returns 0 though they never reached the disk, so only a new file, synced, makes the lines durable again.
    /// On failure `log` stays the old file; when only the directory's fsync failed, the new file already holds the
    /// name, so appends to the old one are not in the journal any more: the caller must rewrite again before
    /// trusting it (`send` does, every second, until one succeeds). Sequence numbers go on.
    public func rewrite(unacknowledged: [Chunk], ack: UInt64) throws(StoreError) {
        let level = max(acked, ack)
        let chunks = unacknowledged.filter { $0.seq > level }
        let (file, unsynced) = try LogFile.replace(path, records: Self.records(session: session, acked: level,
                                                                              reserved: (reserved, reservedBoot), chunks),
                                                  extents: LogFile.journalExtents)
        // Renamed into place: later lines go to it even when the directory's fsync failed (still an error, so the
        // streak goes on). The old file has no name any more; a line appended to it was lost at the next start.
        log = file
        acked = level
        if let unsynced { throw unsynced }
    }

    /// Queues the unacknowledged chunks of held journals after every line of this one, for `OutboxShelf.release`:
    /// one atomic replace of the journal (`LogFile.replace`: a new file written and fsynced, renamed over it, the
    /// directory fsynced) holding its header, `unacknowledged` (its chunks above `acked`: `pending` for a journal
    /// just opened), each of `held`'s chunks numbered anew after them, and a record `{"released":"FILE"}` naming
    /// each held file. So a crash leaves either the journal as it was or one with every released line and the
    /// names of their files, never part of them: the caller removes the held files only after this returned
    /// (their lines are queued), and a crash before their removal is durable leaves files this journal names,
    /// which the next open of the journal removes (`init`, `OutboxShelf.settleReleased`) instead of a later
    /// release queueing them again. The reservation in the header covers the new numbers.
    /// Throws when the new journal could not be written (the journal is as it was) or, renamed into place, not
    /// opened (either way the held files must stay: a journal that names them settles them when next opened).
    /// Returns the error of the directory's fsync if only that failed: the new journal holds the name (`log` is
    /// it), but may not survive a crash — the held files must stay.
    func queueReleased(_ held: [(file: String, chunks: [Chunk])], after unacknowledged: [Chunk]) throws(StoreError)
        -> StoreError? {
        var chunks = unacknowledged.filter { $0.seq > acked }
        var seq = nextSeq
        for file in held {
            for var chunk in file.chunks {
                chunk.seq = seq
                chunks.append(chunk)
                seq += 1
            }
        }
        var reservation = (reserved, reservedBoot)
        if seq - 1 > reserved || !reservedThisBoot { reservation = (seq - 1 + Self.reservationStep, boot) }
        var records = Self.records(session: session, acked: acked, reserved: reservation, chunks)
        for file in held { records += Self.releasedLine(file.file) }
        let (replaced, unsynced) = try LogFile.replace(path, records: records, extents: LogFile.journalExtents)
        log = replaced
        nextSeq = seq
        (reserved, reservedBoot) = reservation
        return unsynced
    }

    /// `{"released":"FILE"}` and a newline: the held journal FILE (a name in the outbox directory) was released
    /// into this one (`queueReleased`).
    static func releasedLine(_ file: String) -> [UInt8] {
        JSONValue.object([("released", .string(file))]).encoded() + [0x0A]
    }

    /// A whole journal's records: the header, then a record for each of `chunks`.
    static func records(session: String, acked: UInt64, reserved: (UInt64, String), _ chunks: [Chunk]) -> [UInt8] {
        var out = header(session: session, acked: acked, reserved: reserved)
        for chunk in chunks { out += chunkLine(chunk) }
        return out
    }

    /// fdatasync, or fsync when the file grew since the last `sync` (`LogFile.sync`; `log.syncCounts` tells which).
    public func sync() throws(StoreError) {
        try log.sync()
    }

    static func newSessionID() -> String {
        "s-" + Hex.encode(SecureRandom.bytes(8))
    }

    static func header(session: String, acked: UInt64, reserved: (UInt64, String)) -> [UInt8] {
        JSONValue.object([("session", .string(session)), ("acked", .integer(Int64(acked))),
                          ("reserved", .integer(Int64(clamping: reserved.0))), ("boot", .string(reserved.1))])
            .encoded() + [0x0A]
    }

    static let chunkPrefix = Array(#"{"c":"#.utf8)

    static func chunkLine(_ chunk: Chunk) -> [UInt8] {
        var out: [UInt8] = chunkPrefix
        chunkLine(chunk, into: &out)
        return out
    }

    /// Appends `{"c":{chunk}}` and a newline, the chunk written directly (`MessageCodec.writeChunk`).
    static func chunkLine(_ chunk: Chunk, into out: inout [UInt8]) {
        MessageCodec.writeChunk(chunk, into: &out)
        out.append(UInt8(ascii: "}"))
        out.append(0x0A)
    }

    /// A journal up to this size is not compacted on open (see `init`).
    static let compactAbove = 64 * 1024

    struct Loaded {
        /// The file's size, padding included.
        var size = 0
        /// Where its records end (`LogFile.dataEnd`).
        var records = 0
        var endsWithNewline = true
        var session: String?
        var acked: UInt64 = 0
        var chunks: [Chunk] = []
        /// The highest reservation, and the boot of the last one (header or record).
        var reserved: UInt64 = 0
        var reservedBoot = ""
        /// The held files named by `{"released":…}` records: their lines are queued in this journal.
        var released: [String] = []
    }

    static func load(_ path: String) throws(StoreError) -> Loaded {
        var result = Loaded()
        guard let bytes = try FileIO.read(path) else { return result }
        result.size = bytes.count
        result.records = LogFile.dataEnd(bytes)
        result.endsWithNewline = result.records == 0 || bytes[result.records - 1] == 0x0A
        for line in LogFile.lines(bytes) {
            // A torn last line (killed mid-write, maybe followed by zeros) was never sent: skipping it loses
            // nothing acknowledged. So is any line that is not a record (corrupt, or cut by NUL bytes).
            guard let v = try? JSONValue.parse(Array(line), maxDepth: 4, maxBytes: 1 << 20) else { continue }
            if let s = v["session"]?.stringValue, result.session == nil {
                result.session = s
                result.acked = UInt64(max(0, v["acked"]?.int64Value ?? 0))
                result.reserved = UInt64(max(0, v["reserved"]?.int64Value ?? 0))
                result.reservedBoot = v["boot"]?.stringValue ?? ""
            } else if let r = v["r"]?.int64Value, r > 0, let b = v["b"]?.stringValue {
                result.reserved = max(result.reserved, UInt64(r))
                result.reservedBoot = b
            } else if let file = v["released"]?.stringValue {
                result.released.append(file)
            } else if let c = v["c"], let chunk = try? MessageCodec.decodeChunk(c) {
                if chunk.seq > (result.chunks.last?.seq ?? result.acked) { result.chunks.append(chunk) }
            } else if let a = v["a"]?.int64Value, a > 0 {
                result.acked = max(result.acked, UInt64(a))
            }
        }
        return result
    }
}
