#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import SpeakBridgeSupport

/// `Sender`'s clock and journal durability, on `queue`: the 50 ms tick, the ack record and the journal fsync.
///
/// Flow (a line at human pace, a phrase every 0.1–2 s):
/// 1. The line's wake-up (stdin) journals it with the previous line's ack record in the same write(2)
///    (`Outbox.append(…, ack:)`), sends its frame, arms the tick (`scheduleTick`) and then, once the frame is
///    written (`LinkDriver.afterSends`, same loop turn), hands the fsync to its thread (`syncSoon`,
///    `syncAfterSending`, `JournalSyncer`).
/// 2. Its ack: read in the next line's wake-up while lines keep coming (Sender+LazyAcks.swift: the tick then waits
///    0.5 s, for a pause in the input); otherwise its own wake-up, where, with nothing left in flight and nothing
///    left to fsync, `settleAfterFrame` cancels the tick. So one or two wake-ups of the socket thread per line, not
///    three (the tick's), and an ack does no journal work and wakes no thread.
/// 3. Otherwise (lines in flight, not connected, a live status line, or a fsync handed over less than a tick ago,
///    as at a fast pace) the tick does the journal work 50 ms after it was armed, so every journal write is still
///    fsynced within 50 ms and fsyncs stay batched (about one a tick); it stops while there is nothing to time
///    (`isQuiet`).
/// The ack record of a line acknowledged before its tick waits for the next line (riding in its journal write),
/// tick or exit: a lost or late ack record only means a resend that the desktop drops.
extension Sender {
    static let tickInterval: Duration = .milliseconds(50)
    static let tickSeconds = 0.05

    func scheduleTick() {
        tickAt = now + Self.tickSeconds
        // Timed by the socket thread's loop (an lws timer in the poll it sleeps in anyway), run there through
        // `queue.sync`: no dispatch timer thread, no worker woken, no queue handed between threads per tick.
        driver.schedule(after: Self.tickInterval, tickWork)
    }

    /// Nothing for the clock to do until the next event: connected, every line acknowledged and journaled, no
    /// live status line to redraw. (Redials, ack stalls, time limits and "still waiting" lines all need lines in
    /// flight or no connection; an event — a line, a frame, a closed connection — starts the clock again.)
    var isQuiet: Bool {
        !needsSync && ackToJournal <= outbox.acked && core.window.isDrained && core.link.isEstablished
            && !status.isTerminal
    }

    func tick() {
        guard core.exitCode == nil else { return }
        Trace.mark("sendtick")
        journalAck()
        if needsSync { startSync(at: now) }
        apply(.tick)
        guard core.exitCode == nil else { return }
        if lazyOn != nil && now - lastLineAt >= Self.lazyAckSeconds { readAcksNow() }  // input paused
        if isQuiet {
            tickAt = nil  // an idle `send` (input open, all acknowledged) does not wake 20 times a second
        } else if !scheduleLazyTick() {
            scheduleTick()
        }
    }

    /// After a line's journal write: unless a fsync was handed over less than a tick ago (then the tick, at most
    /// 50 ms after the write, does it: at a fast pace fsyncs stay batched), `syncAfterSending` runs once the line's
    /// frame is written, in the same loop turn.
    func syncSoon(at: Double) {
        guard needsSync, core.exitCode == nil else { return }
        guard at - lastSyncAt >= Self.tickSeconds else {
            // The tick does it, within 50 ms of this write: a later (lazy) tick is brought forward.
            if let tickAt, tickAt > at + Self.tickSeconds { scheduleTick() }
            return
        }
        driver.afterSends(syncWork)
    }

    /// Hands the fsync to `syncer`, with the last ack's record: after the frame went out, so neither the
    /// write(2), the dup nor the worker's wake-up delays the line.
    func syncAfterSending() {
        guard needsSync, core.exitCode == nil else { return }  // the tick or the end was first
        journalAck()
        startSync(at: now)
        if ticking { _ = scheduleLazyTick() }  // the fsync is handed over: the clock can wait for the next line
    }

    /// After a desktop frame (an ack, usually): when nothing is left to time — connected, nothing in flight, the
    /// journal's fsync handed over, no live status line — the tick is cancelled; the next event arms it again.
    func settleAfterFrame() {
        guard ticking, !needsSync, core.exitCode == nil, core.window.isDrained, core.link.isEstablished,
              !status.isTerminal else { return }
        // Acks read between lines: the lazy tick stays (the next line re-arms it; a pause in the input ends it).
        guard lazyOn == nil else { return }
        tickAt = nil
        driver.cancelSchedule()
    }

    /// Hands the journal's sync to `syncer`'s thread: sending goes on while the disk catches up (the journal write
    /// already happened). An fdatasync while the journal's preallocated size holds, an fsync after it grew
    /// (`LogFile.sync`).
    func startSync(at: Double) {
        needsSync = false
        lastSyncAt = at
        guard journalFailure == nil else { return rewriteJournal(at: at) }  // an earlier sync failed: not trusted
        syncer.submit(outbox.log)
    }

    /// Journals the latest ack, if it moved: with the next fsync (a tick's or a line's) or at the end, rather than
    /// once per ack frame. A lost or late ack record only means a resend that the desktop drops (it answers
    /// `resume` with what it has), never a lost line.
    func journalAck() {
        guard ackToJournal > outbox.acked else { return }
        do {
            try outbox.markAcked(ackToJournal)
        } catch {
            // Not fatal: a lost ack record only means a resend that the desktop drops.
            status.warning("cannot journal an ack: \(error.description)")
        }
    }
}
