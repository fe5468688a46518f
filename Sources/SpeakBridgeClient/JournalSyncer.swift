#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import SpeakBridgeStore
import SpeakBridgeSupport

/// `send`'s journal fsyncs, on one thread of its own (`sb-fsync`) that lives as long as the process.
///
/// Why not a dispatch queue (as before): libdispatch lets an idle worker thread exit after 5 s, and a phone
/// dictates in phrases with longer pauses than that, so after each pause the fsync's worker was created again
/// (clone3, rseq, set_robust_list, prctl, setpriority, 4 rt_sigprocmask, a madvise at its exit: about 10 system
/// calls and a thread's start-up per line, measured at 7 s pacing). This thread sleeps between fsyncs
/// instead: a line costs the same futex wake and wait as a dispatch worker's, whatever the pause.
///
/// Flow: `submit` asks for a sync of the journal's `LogFile` and wakes the thread, started on first use (a `send
/// --text` that syncs inline at its end starts none). The thread calls `LogFile.sync`, which may run while the
/// socket thread appends: an fdatasync(2) while the file keeps its preallocated size, a full fsync after it grew
/// (the log's own flag says which). The thread holds the log, so its descriptor stays open while it syncs. Requests
/// that come while a sync runs are served by one more sync. `drain` waits until every request made before it is on
/// disk.
///
/// How it sleeps: on a semaphore (a futex wait; `submit` posts it, one futex wake when the thread sleeps). A condition
/// variable woken by broadcast cost a third futex call a line (glibc's group switch), and a `drain` waiting on the
/// same condition could take a signal meant for the thread; `drain` waits on a semaphore of its own.
///
/// A failed sync goes back to the owner (`onFailure`), which rewrites the journal: this thread never retries it.
///
/// `@unchecked Sendable`: `log`, `requested`, `busy`, `started`, `drainers`, `failureReport`, `failedLog` and
/// `lastFailure` are read and written only with `lock`
/// held; the semaphores are thread-safe, and `LogFile` is `Sendable`.
final class JournalSyncer: @unchecked Sendable {
    private let lock = ThreadLock()
    private let work = DispatchSemaphore(value: 0)
    private var log: LogFile?
    private var requested = false
    private var busy = false
    private var started = false
    private var drainers: [DispatchSemaphore] = []
    private var failureReport: (@Sendable (LogFile, StoreError) -> Void)?
    private var failedLog: LogFile?
    private var lastFailure: StoreError?

    /// Has `journal` synced on the syncer's thread (inline, if that thread cannot be created).
    func submit(_ journal: LogFile) {
        let start: Bool = lock.withLock {
            log = journal
            requested = true
            defer { started = true }
            return !started
        }
        work.signal()
        if start && !Threads.start(name: "sb-fsync", { [self] in run() }) {
            lock.withLock { started = false }
            syncInline()  // no thread: durability first
        }
    }

    /// Returns once every fsync requested before the call is done.
    func drain() {
        let done = DispatchSemaphore(value: 0)
        let wait: Bool = lock.withLock {
            guard started, busy || requested else { return false }
            drainers.append(done)
            return true
        }
        if wait { done.wait() } else { syncInline() }  // no thread: what is requested, here (usually nothing)
    }

    private func run() {
        while true {
            work.wait()
            let journal: LogFile? = lock.withLock {
                guard requested else { return nil }  // a post whose request an earlier round served
                requested = false
                busy = true
                return log
            }
            if let journal { sync(journal) }
            let done: [DispatchSemaphore] = lock.withLock {
                busy = false
                guard !requested else { return [] }  // more came: the next round ends the drain
                defer { drainers.removeAll() }
                return drainers
            }
            for drainer in done { drainer.signal() }
        }
    }

    /// What is requested, on the calling thread (no syncer thread).
    private func syncInline() {
        let journal: LogFile? = lock.withLock {
            guard requested else { return nil }
            requested = false
            return log
        }
        if let journal { sync(journal) }
    }

    /// A failed sync is reported (`onFailure`), never left for the next one: on Linux a failed writeback marks its
    /// pages clean and reports the error once per descriptor, so the next fsync of the same file would return 0
    /// with the lines not on disk. The owner rewrites the journal on its own queue (where appends cannot race the
    /// rewrite) and hands the new file to the next `submit`. The failure is kept too (`failure(of:)`), for the end
    /// of the run, which waits here (`drain`) and cannot take a report meanwhile. Nothing extra on success.
    private func sync(_ journal: LogFile) {
        do {
            try journal.sync()
        } catch {
            let report: (@Sendable (LogFile, StoreError) -> Void)? = lock.withLock {
                failedLog = journal
                lastFailure = error
                return failureReport  // the field: `onFailure` takes `lock` itself
            }
            report?(journal, error)
        }
        Trace.mark("jsync")
    }

    /// Set once by the owner before its first `submit`; called on the syncer's thread when a sync fails.
    var onFailure: (@Sendable (LogFile, StoreError) -> Void)? {
        get { lock.withLock { failureReport } }
        set { lock.withLock { failureReport = newValue } }
    }

    /// The error of the last failed sync, if it was of `journal` (a later sync of the same file proves nothing).
    func failure(of journal: LogFile) -> StoreError? {
        lock.withLock { failedLog === journal ? lastFailure : nil }
    }
}
