#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import SpeakBridgeSupport

/// `Sender`'s clock and journal durability, on `queue`: the tick, the ack record and the journal fsync.
///
/// The durability rule: every journal write is durable within `durableWithin` (50 ms) of being made — fsynced, or
/// acknowledged by the desktop, whose copy is then durable (it acks only after its own fsync: `Pairing/PROTOCOL.md`).
/// A line the desktop acknowledged needs no fsync here: a crash of this machine can lose its record, and the
/// desktop still has it (no number is given twice after such a crash: `Outbox` reserves sequence numbers ahead,
/// durably, and after a reboot numbers new chunks past its last reservation). So while the desktop answers within
/// 50 ms — it acks at most 25 ms after a line, and `send` reads the acks waiting for a write 5 ms before its deadline
/// if no line read them first — `send` makes no fsync while lines come (one at the end of the run); it makes them
/// when the desktop is away or slow, at the deadline (the fsync starts then), at most one per tick.
///
/// Flow (`owed`: the writes neither fsynced nor acknowledged, oldest first):
/// 1. A line's wake-up journals it (with the previous ack's record in the same write(2): `Outbox.append(…, ack:)`),
///    sends its frame and notes the write (`owe`): the tick then comes before the oldest owed write's deadline
///    (step 3).
/// 2. Acks: read in a later line's wake-up while lines keep coming (Sender+LazyAcks.swift), otherwise as they come;
///    each drops the writes it covers from `owed` (`settleAfterFrame`, `settleOwed`).
/// 3. The tick, `lookAhead` (5 ms) before the oldest owed write's deadline, has the acks left unread in the kernel
///    read (they come in the same wake-up, step 2) and comes back at the deadline; an owed write still unacknowledged
///    then gets the fsync, handed to its thread (`startSync`, `JournalSyncer`), which covers every write before it.
///    With nothing owed, every line acknowledged and nothing to redraw, the tick stops (`isQuiet`). At a human pace
///    that is two wake-ups a line (the line; the look, which reads its ack) and no fsync; at a fast pace the look
///    comes every 15–25 ms (the desktop acks every 25 ms) and finds the old writes acknowledged.
/// 4. At the end one fsync of what the run wrote since the last (`syncJournalAtEnd`): the journal is then as the
///    run left it, acknowledged lines included.
/// The ack record of a line acknowledged before its tick waits for the next line (riding in its journal write),
/// tick or exit: a lost or late ack record only means a resend that the desktop drops.
extension Sender {
    static let tickSeconds = 0.05
    /// Every journal write is fsynced or acknowledged within this many seconds (see above).
    static let durableWithin = 0.05
    /// A tick this close to a deadline fsyncs rather than coming back for it.
    static let deadlineSlack = 0.001
    /// How long before an owed write's deadline the tick reads the acks waiting for it.
    static let lookAhead = 0.005

    /// Arms the tick `tickSeconds` from now (`at`, when the caller has it), or at `deadline` if that is sooner (an owed
    /// write's check).
    func scheduleTick(by deadline: Double? = nil, from at: Double? = nil) {
        let at = at ?? now
        let delay = min(Self.tickSeconds, max(0, (deadline ?? .infinity) - at))
        tickAt = at + delay
        // Timed by the socket thread's loop (an lws timer in the poll it sleeps in anyway), run there through
        // `queue.sync`: no dispatch timer thread, no worker woken, no queue handed between threads per tick.
        driver.schedule(after: .nanoseconds(Int64(delay * 1e9)), tickWork)
    }

    /// Nothing for the clock to do until the next event: connected, every line acknowledged and journaled, no
    /// live status line to redraw. (Redials, ack stalls, time limits and "still waiting" lines all need lines in
    /// flight or no connection; an event — a line, a frame, a closed connection — starts the clock again.)
    var isQuiet: Bool {
        !needsSync && ackToJournal <= outbox.acked && core.window.isDrained && core.link.isEstablished
            && !status.isTerminal && inputHold == nil
    }

    func tick() {
        guard core.exitCode == nil else { return }
        Trace.mark("sendtick")
        if needsSync { settleOwed(at: now, looking: true) }
        if inputHold != nil { retryHeldInput() }  // input the journal could not take (Sender+InputHold.swift)
        guard core.exitCode == nil else { return }
        journalAck()
        let journalEnd = outbox.log.end
        if journalEnd > compactJournalAbove || (core.window.isDrained && journalEnd > compactDrainedAbove) {
            compactLongJournal()
        }
        apply(.tick)
        guard core.exitCode == nil else { return }
        if lazyOn != nil && (now - lastLineAt >= Self.lazyAckSeconds || (!needsSync && core.window.isDrained)) {
            readAcksNow()  // input paused, or every line acknowledged: acks (and a close) are read as they come
        }
        if isQuiet {
            tickAt = nil  // an idle `send` (input open, all acknowledged) does not wake 20 times a second
        } else if !scheduleLazyTick() {
            scheduleTick(by: needsSync ? durabilityCheck(after: now) : nil)
        }
    }

    /// A journal write of chunks through `seq`, made at `at`, is owed durability (step 1): the tick comes before its
    /// deadline. Only a write that starts the list arms it: while writes are owed the tick is armed at the oldest's
    /// check or sooner (`settleOwed` moves it later as acks come).
    func owe(_ seq: UInt64, at: Double) {
        journalDirty = true
        if !needsSync { owed.removeAll(keepingCapacity: true) }  // what an earlier sync or rewrite covered
        needsSync = true
        let first = owed.isEmpty
        owed.append((seq: seq, at: at))
        guard first, core.exitCode == nil else { return }
        let check = durabilityCheck(after: at)
        if let tickAt, tickAt <= check + Self.deadlineSlack { return }  // armed soon enough already
        scheduleTick(by: check, from: at)
    }

    /// When the oldest owed write must be durable (now + `durableWithin` when none is listed: a rewrite is owed).
    var syncDeadline: Double { (owed.first?.at ?? now) + Self.durableWithin }  // `now` only after a failure

    /// When the tick looks at the owed writes next, seen at `at`: `lookAhead` before the oldest one's deadline, so
    /// that acks waiting unread can still come in (`settleOwed`); at the deadline once that look is past.
    func durabilityCheck(after at: Double) -> Double {
        let deadline = syncDeadline
        return deadline - Self.lookAhead > at + Self.deadlineSlack ? deadline - Self.lookAhead : deadline
    }

    /// Drops the owed writes the desktop has acknowledged, and hands over the fsync when the oldest left is due
    /// (steps 2 and 3). `looking` (the tick, before the deadline): acks left unread in the kernel
    /// (Sender+LazyAcks.swift) are read as they come from now on — they come in this wake-up, and drop what they
    /// cover (`settleAfterFrame`) before the deadline's tick.
    func settleOwed(at: Double, looking: Bool = false) {
        guard journalFailure == nil else {
            startSync(at: at)  // a rewrite, at most once a second (Sender+JournalFailure.swift)
            return
        }
        let acked = core.window.acked
        guard let first = owed.firstIndex(where: { $0.seq > acked }) else {
            owed.removeAll(keepingCapacity: true)
            needsSync = false  // every write acknowledged: nothing to fsync
            return
        }
        if first > 0 { owed.removeFirst(first) }
        if syncDeadline <= at + Self.deadlineSlack {
            startSync(at: at)
        } else if looking {
            readAcksNow()
        } else if first > 0 && ticking {
            // Acks read between lines moved the oldest owed write: the tick moves with it, so at a fast pace it
            // does not wake the thread to find them already read.
            scheduleTick(by: durabilityCheck(after: at), from: at)
        }
    }

    /// After a desktop frame (an ack, usually): drops the owed writes it acknowledged; when nothing is left to time
    /// — connected, nothing in flight or owed, no live status line — the tick is cancelled; the next event arms it
    /// again.
    func settleAfterFrame() {
        if needsSync && journalFailure == nil { settleOwed(at: now) }
        guard ticking, !needsSync, core.exitCode == nil, core.window.isDrained, core.link.isEstablished,
              !status.isTerminal, inputHold == nil else { return }
        // Acks read between lines: the lazy tick stays (the next line re-arms it; a pause in the input ends it).
        guard lazyOn == nil else { return }
        // The tick stops here: a journal the run filled is compacted now that every line is acknowledged.
        if outbox.log.end > compactDrainedAbove { compactLongJournal() }
        tickAt = nil
        driver.cancelSchedule()
    }

    /// Hands the journal's sync to `syncer`'s thread: sending goes on while the disk catches up (the journal write
    /// already happened). An fdatasync while the journal's preallocated size holds, an fsync after it grew
    /// (`LogFile.sync`).
    func startSync(at: Double) {
        needsSync = false
        journalDirty = false  // the fsync handed over covers every write so far
        owed.removeAll(keepingCapacity: true)  // this fsync covers every write so far
        guard journalFailure == nil else { return rewriteJournal(at: at) }  // an earlier sync failed: not trusted
        syncer.submit(outbox.log)
    }

    /// A running `send`'s journal is compacted once its records pass this many bytes and half of them are
    /// acknowledged lines' (as the desktop's progress log is: `ProgressLog.compactAfterBytes`).
    static let compactRunningAbove = 8 << 20

    /// Keeps a long run's journal bounded on disk: the acknowledged lines' records are dropped while `send` runs, not
    /// only at its exit (before 2026-12-07 a `send` fed for hours or by a fast program grew its journal by every
    /// line it ever sent, about 60 bytes a short line, until it exited).
    ///
    /// When: from the tick, once the records pass `compactJournalAbove` (8 MiB at first), or pass
    /// `compactDrainedAbove` (8 MiB) with every line acknowledged; and only if an ack moved since the last
    /// compaction (nothing else can be dropped). The records of unacknowledged lines must stay, so what a compaction
    /// would free is the size less theirs (`OutboxWindow.pendingRecordsBound`, an upper bound: never a rewrite that
    /// frees nothing, as an estimate below the records' size once made every 4 MiB while the desktop was away);
    /// under 4 MiB it waits until that many more bytes are written (or every line is acknowledged). So the records
    /// of acknowledged lines stay under 8 MiB plus a tick's lines, whatever is in flight; when the desktop is away
    /// the journal holds what it must and is not rewritten.
    ///
    /// How: `compactJournal` (Sender+InputHold.swift): every line acknowledged, the file is cut back to its header in
    /// place; otherwise a new file with the header and the unacknowledged lines, fsynced, is renamed over it. The
    /// fsync thread is drained first, so that no sync of the old file runs during the cut. Not while a failed sync
    /// is being repaired or input is held (those paths rewrite or compact on their own). A compaction that fails
    /// is tried again 8 MiB later (both thresholds move), with one warning each time; one that failed after
    /// changing the file leaves it to the failed-sync repair (`journalFailure`: rewritten from memory).
    @inline(never)  // once per megabytes of records: kept out of the tick's usual work
    func compactLongJournal() {
        guard journalFailure == nil, inputHold == nil else { return }
        let end = outbox.log.end
        let worth = Self.compactRunningAbove / 2
        guard core.window.acked > compactedAtAck else {
            compactJournalAbove = end + worth  // nothing acknowledged since: nothing to drop yet
            return
        }
        let dead = end - (core.window.isDrained ? 0 : core.window.pendingRecordsBound())
        guard dead >= worth || core.window.isDrained else {
            compactJournalAbove = end + (worth - max(0, dead))
            return
        }
        syncer.drain()
        if compactJournal() {
            compactedAtAck = core.window.acked
            compactJournalAbove = max(Self.compactRunningAbove, outbox.log.end + worth)
            compactDrainedAbove = Self.compactRunningAbove
        } else {
            compactJournalAbove = outbox.log.end + Self.compactRunningAbove
            compactDrainedAbove = compactJournalAbove
            if journalFailure == nil {
                status.warning("cannot compact the journal (\(outbox.log.end) bytes of records): it grows on and is "
                               + "tried again after another \(Self.compactRunningAbove >> 20) MiB")
            }
        }
    }

    /// Journals the latest ack, if it moved: with the next fsync (a tick's or a line's) or at the end, rather than
    /// once per ack frame. A lost or late ack record only means a resend that the desktop drops (it answers
    /// `resume` with what it has), never a lost line.
    func journalAck() {
        guard ackToJournal > outbox.acked else { return }
        do {
            try outbox.markAcked(ackToJournal)
            journalDirty = true
        } catch {
            // Not fatal: a lost ack record only means a resend that the desktop drops.
            status.warning("cannot journal an ack: \(error.description)")
        }
    }
}
