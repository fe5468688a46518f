#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import SpeakBridgeSupport

/// `Sender`'s clock and journal durability, on `queue`: the 50 ms tick, the ack record and the journal fsync.
///
/// Flow (a line at human pace, a phrase every 0.1–2 s):
/// 1. The line's wake-up (stdin) journals it (write(2)), sends its frame and arms the tick (`scheduleTick`).
/// 2. Its ack's wake-up: with nothing left in flight, `settleAfterFrame` writes the ack record, hands the fsync to
///    `syncQueue` and cancels the tick. Two wake-ups of the socket thread per line, not three.
/// 3. Otherwise (lines in flight, not connected, a live status line, or an fsync handed over less than a tick ago,
///    as at a fast pace) the tick does it 50 ms after it was armed, so every journal write is still fsynced within
///    50 ms and fsyncs stay batched (at most one a tick); it stops while there is nothing to time (`isQuiet`).
extension Sender {
    static let tickInterval: Duration = .milliseconds(50)
    static let tickSeconds = 0.05

    func scheduleTick() {
        ticking = true
        // Timed by the socket thread's loop (an lws timer in the poll it sleeps in anyway), run there through
        // `queue.sync`: no dispatch timer thread, no worker woken, no queue handed between threads per tick.
        driver.schedule(after: Self.tickInterval) { [weak self] in self?.tick() }
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
        if isQuiet {
            ticking = false  // an idle `send` (input open, all acknowledged) does not wake 20 times a second
        } else {
            scheduleTick()
        }
    }

    /// After a desktop frame (an ack, usually): when it left nothing to time, the tick's work is done now, in this
    /// wake-up, and the tick is cancelled — unless a fsync was handed over less than a tick ago and another is
    /// due: then the tick stays and does it (at a fast pace every ack drains the window; this keeps one fsync a
    /// tick). The fsync comes sooner than the tick's, never later; the ack record only earlier.
    func settleAfterFrame() {
        guard ticking, core.exitCode == nil, core.window.isDrained, core.link.isEstablished, !status.isTerminal
        else { return }
        let at = now
        if needsSync && at - lastSyncAt < Self.tickSeconds { return }
        journalAck()
        if needsSync { startSync(at: at) }
        guard isQuiet else { return }  // an ack record that could not be written: the tick retries it
        ticking = false
        driver.cancelSchedule()
    }

    /// Hands the journal's fsync to `syncQueue`: sending goes on while the disk catches up (the journal write
    /// already happened). fsync, not fdatasync: the records are appends, so the size changes and the inode is
    /// journaled either way (measured on ext4: the same 3 sleeps and the same system time per call).
    func startSync(at: Double) {
        needsSync = false
        lastSyncAt = at
        let handle = outbox.syncHandle()
        guard handle >= 0 else { return }
        syncQueue.async {
            fsync(handle)
            Trace.mark("jsync")
            close(handle)
        }
    }

    /// Journals the latest ack, if it moved: once per tick or settled ack (and before a sync or the end) rather
    /// than once per ack frame. A lost or late ack record only means a resend that the desktop drops (it answers
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
