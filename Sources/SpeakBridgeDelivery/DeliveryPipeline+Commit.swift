import Dispatch
import SpeakBridgeStore
import SpeakBridgeSupport

/// The committer: the pipeline's one thread (`sb-commit`) that fsyncs the progress log for every advance and only
/// then hands the advances to `onDurable` (the acks).
///
/// Flow of one turn of `commitLoop`:
/// 1. Pacing (`CommitPacing`): after an fsync, while advances keep coming, wait until `interval` after that fsync
///    started, gathering advances — unless enough chunks wait, an urgent advance came, or the pipeline stops.
/// 2. Idle: wait, untimed, for the next advance (after a burst, first a quiet spell that trims the heap).
/// 3. fsync what is pending, commit it in the levels, call `onDurable`. When the fsync fails: nothing is
///    committed, the batch goes back to pending, an error on stderr (once a streak), and one second later the next
///    turn tries again — a rewrite of the progress log from memory, not a second fsync (`ProgressLog.sync`). The
///    first success after a streak is logged.
///
/// Human pace (a phone dictating, lines seconds apart): the pacing wait of step 1 would run out with nothing
/// pending after every line — one sleep and wake-up of this thread a line for nothing. So after a pacing wait that
/// ran out empty (`quiet`), step 1 is skipped: the thread goes straight to the idle wait, and an advance that
/// wakes it within the interval after all (the pace picked up) waits there for the rest of the interval before
/// its fsync. The rule stays exactly `CommitPacing`'s: at once after a quiet spell or for urgent chunks, else at
/// most one fsync per interval while advances keep coming.
///
/// How it sleeps: on `bell`, a semaphore, with the state under `lock` (`committer` says whether and how it waits;
/// whoever rings sets it `busy`). Not a condition variable: glibc's `pthread_cond_wait` takes its mutex back marked
/// contended, so the first unlock after every wait made a FUTEX_WAKE that woke nobody (two a paced line). A post
/// that a timed-out wait missed leaves the semaphore at one: the next wait returns at once and the loop, which
/// re-checks its condition under the lock, waits again.
extension DeliveryPipeline {
    func commitLoop() {
        /// CLOCK_MONOTONIC at the start of the last fsync; nil before the first.
        var lastSync: UInt64?
        /// The last pacing wait ran out with nothing pending: the next one is skipped (see above).
        var quiet = false
        while true {
            lock.lock()
            if let lastSync, !quiet {
                // Within the interval of the last fsync: gather advances until it ends, unless enough chunks wait
                // or the pipeline stops. Waiting here even with nothing pending yet means a line that comes in
                // the meantime need not wake this thread (no futex call on the lws thread per line).
                pace(until: lastSync &+ pacing.intervalNanoseconds)
                quiet = !levels.hasPending
            }
            // The interval is over (or cut short, or skipped): what is pending goes now; with nothing pending, the
            // next advance is the first after a quiet spell and is fsynced at once.
            if committedSinceTrim >= Self.trimAfterChunks, let lastSync {
                // After much work (a burst), a real quiet spell — nothing committed for `trimQuietNanoseconds`
                // since the last fsync started — gives the freed heap back (`HeapTrim`), off the lock. An advance
                // meanwhile wakes this wait as any other (`idle`) and the spell starts again after its fsync: a
                // trickle never trims, and the wait costs no wake-up per line.
                let quietUntil = lastSync &+ trimQuietNanoseconds
                while !levels.hasPending && !stopped && ThreadCondition.monotonicNanoseconds < quietUntil {
                    sleep(.idle, until: quietUntil)
                }
                if !levels.hasPending && !stopped {
                    committedSinceTrim = 0
                    lock.unlock()
                    HeapTrim.releaseFreePages()
                    lock.lock()
                    trims &+= 1
                }
            }
            while !levels.hasPending && !stopped { sleep(.idle, until: nil) }
            if stopped && !levels.hasPending {
                lock.unlock()
                return
            }
            if quiet, let lastSync {
                // The skipped pacing wait: an advance within the interval of the last fsync waits for its end
                // after all, and the next turn paces again.
                let due = lastSync &+ pacing.intervalNanoseconds
                if ThreadCondition.monotonicNanoseconds < due {
                    pace(until: due)
                    quiet = false
                }
            }
            committer = .busy
            flushNow = false
            let batchChunks = levels.pendingChunks
            let batch = levels.takePending()
            lock.unlock()
            lastSync = ThreadCondition.monotonicNanoseconds
            Trace.mark("commit", 0)  // the fsync starts (`fsync` marks its end): Tests/bench/fsync_overlap.py
            do {
                try progress.sync()
            } catch {
                // Disk full or I/O error: nothing of the batch is acknowledged; retry every second. The retry is
                // not an fsync of the same file (Linux reports a failed writeback once and then returns 0 for
                // pages that never reached the disk) but a rewrite of the log from memory (`ProgressLog.sync`), so
                // its success is real. Said at once on stderr, once a streak; `status` shows it while it lasts.
                let first = lock.locked {
                    defer { commitFailure = error.description }
                    levels.requeue(batch)
                    return commitFailure == nil
                }
                if first { Self.reportCommitFailure(error) }
                Threads.sleep(seconds: 1)
                continue
            }
            let (advanced, recovered) = lock.locked {
                defer { commitFailure = nil }
                committedSinceTrim &+= Int(clamping: batchChunks)
                return (levels.commit(batch), commitFailure != nil)
            }
            if recovered { Self.reportCommitRecovery(progress) }
            Trace.mark("fsync", advanced.reduce(0) { max($0, $1.1) })  // no array per fsync
            if !advanced.isEmpty { onDurable.call(advanced) }
        }
    }

    /// The first failure of a streak, on stderr: what failed (the log's path and errno text: ours, but escaped as
    /// anything printed) and what it means.
    static func reportCommitFailure(_ error: StoreError) {
        Console.error("cannot make delivery progress durable: \(PeerText.escape(error.description)); no chunk is "
                      + "acknowledged until the progress log is rewritten and synced (retrying every second)",
                      hint: error.hint ?? "check the disk (dmesg); the daemon keeps delivering, clients keep their lines")
    }

    /// The end of a streak: the log was rewritten from memory, synced, renamed, its directory synced.
    static func reportCommitRecovery(_ progress: ProgressLog) {
        Console.info("delivery progress is durable again (\(PeerText.escape(progress.path)) rewritten and synced); "
                     + "acknowledging again")
    }

    /// The pacing wait: until `due` (CLOCK_MONOTONIC), unless enough chunks wait, an urgent advance is in, or the
    /// pipeline stops. Called and returns with `lock` held.
    private func pace(until due: UInt64) {
        while !stopped && !flushNow && levels.pendingChunks < pacing.flushAt
                && ThreadCondition.monotonicNanoseconds < due {
            sleep(.pacing, until: due)
        }
    }

    /// Waits on the bell as `state` says (who may ring it), until rung or CLOCK_MONOTONIC reaches `deadline` (nil:
    /// no deadline). Called and returns with `lock` held; the caller re-checks what it waits for.
    private func sleep(_ state: Committer, until deadline: UInt64?) {
        committer = state
        lock.unlock()
        if let deadline {
            let now = ThreadCondition.monotonicNanoseconds
            if deadline > now {
                _ = bell.wait(timeout: .now() + .nanoseconds(Int(clamping: deadline - now)))
            }
        } else {
            bell.wait()
        }
        lock.lock()
        committer = .busy
        committerWakeups &+= 1
    }
}
