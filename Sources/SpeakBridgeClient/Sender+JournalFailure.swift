import SpeakBridgeStore
import SpeakBridgeSupport

/// `Sender` when the journal's fsync fails (a disk that reports EIO, a full disk, a lost NFS server), on `queue`.
///
/// What it means: the lines read but not yet acknowledged by the desktop are held in memory and still sent (the
/// desktop's ack, not the journal, is what lets a line go), but they would not survive a crash of this machine.
/// And the journal cannot be trusted afterwards: on Linux a failed writeback marks its pages clean and reports the
/// error once per descriptor, so the next fsync of the same file returns 0 with the records not on disk.
///
/// Flow:
/// 1. The syncer's thread (`JournalSyncer`) or the final sync (`.syncJournal`) fails: `journalSyncFailed` (through
///    `queue.async` from that thread) starts a failure streak — one `speakbridge: warning:` saying the above — and
///    marks the journal untrusted (`journalFailure`). A report for a journal already replaced is stale: ignored.
/// 2. From then on every journal sync (`startSync`: the tick's and the line's) is a rewrite instead: `Outbox.rewrite`
///    writes the header and what the core's window holds unacknowledged to a new file, fsyncs it, renames it over
///    the journal and fsyncs the directory — on this queue, where no append can race it. At most one attempt a
///    second (a failing disk is not hammered); `needsSync` stays set meanwhile, so the tick keeps coming.
/// 3. A rewrite that succeeds ends the streak (one line says so); the syncer gets the new file with the next sync.
/// 4. At the end (`settleJournalAtEnd`, from `complete`, after the syncer drained): a journal still untrusted gets
///    one more rewrite. If that fails too and lines are left unacknowledged, they exist only in a journal that is
///    not durable: an error, and `send` exits 74 (EX_IOERR) instead of the core's code. When every line was
///    acknowledged nothing was lost: the exit code stays (0), the warning of step 1 was printed.
/// Nothing here runs on the success path but `startSync`'s check of `journalFailure` (a field of this queue).
extension Sender {
    /// Seconds between two rewrites while the streak lasts.
    static let journalRetrySeconds = 1.0

    /// A sync of `log` failed (step 1). On `queue`.
    @inline(never)  // a failure path: kept out of the per-line callers (`perform`, `startSync`)
    func journalSyncFailed(_ log: LogFile, _ error: StoreError) {
        guard !completed, log === outbox.log else { return }  // a journal replaced since, or the run is over
        if journalFailure == nil {
            status.warning("cannot sync the journal: \(PeerText.escape(error.description)); the "
                           + "\(core.window.pendingCount) line(s) not yet acknowledged by the desktop are held in "
                           + "memory and still sent, but would not survive a crash of this machine until the "
                           + "journal is rewritten (retrying every second)")
        }
        journalFailure = error
        needsSync = true
        if !ticking && core.exitCode == nil { scheduleTick() }
    }

    /// Instead of a sync while the journal is untrusted (step 2): a rewrite, at most once a second.
    @inline(never)  // a failure path: kept out of the per-line callers (`perform`, `startSync`)
    func rewriteJournal(at: Double, force: Bool = false) {
        guard force || at - lastJournalRewriteAt >= Self.journalRetrySeconds else {
            needsSync = true  // the tick comes back for it
            return
        }
        lastJournalRewriteAt = at
        do {
            try outbox.rewrite(unacknowledged: core.window.pending, ack: max(ackToJournal, core.window.acked))
        } catch {
            journalFailure = error
            needsSync = true
            return
        }
        journalFailure = nil
        status.info("the journal is durable again (rewritten from memory and synced): "
                    + "lines not yet acknowledged survive a crash of this machine again")
    }

    /// The final sync (the core's `.syncJournal` before an exit, or `complete` for any other end): inline, when this
    /// run wrote anything since the last fsync — owed chunk records, and the ack records that say which lines are
    /// done, so that a crash after the run finds the journal as the run left it (no acknowledged line shown as
    /// pending by `outbox`, nor moved aside as held at a new pairing). A failure starts a streak and the rewrite is
    /// tried at once.
    @inline(never)  // an end path: kept out of the per-line callers (`perform`, `startSync`)
    func syncJournalAtEnd() {
        let owedSync = needsSync
        needsSync = false
        owed.removeAll(keepingCapacity: true)
        if journalFailure == nil {
            guard owedSync || journalDirty else { return }
            do throws(StoreError) {
                try outbox.sync()
                journalDirty = false
                return
            } catch {
                journalSyncFailed(outbox.log, error)
            }
        }
        rewriteJournal(at: now, force: true)
        needsSync = false
    }

    /// Step 4, in `complete`, once the syncer has drained: rewrites a journal still untrusted; sets `exitOverride`
    /// (74) when that fails with lines left unacknowledged.
    @inline(never)  // a failure path: kept out of the per-line callers (`perform`, `startSync`)
    func settleJournalAtEnd() {
        if journalFailure == nil, let error = syncer.failure(of: outbox.log) {
            journalSyncFailed(outbox.log, error)  // a sync handed over before the end failed
        }
        guard journalFailure != nil else { return }
        rewriteJournal(at: now, force: true)
        guard let failure = journalFailure else { return }
        let left = core.window.pendingCount
        guard left > 0 else { return }  // all acknowledged: nothing to lose
        status.error("cannot sync the journal: \(PeerText.escape(failure.description)); \(left) line(s) not "
                     + "acknowledged by the desktop are journaled but not durable: a crash of this machine before "
                     + "the next `speakbridge send` would lose them",
                     hint: failure.hint ?? "check the disk (dmesg); the next `speakbridge send` resends them")
        exitOverride = Self.exitIOError
    }

    /// EX_IOERR (sysexits.h): the run ended with unacknowledged lines in a journal that could not be synced.
    static let exitIOError: Int32 = 74
}
