#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import SpeakBridgeSupport

/// `send`'s journal fsyncs, on one thread of its own (`sb-fsync`) that lives as long as the process.
///
/// Why not a dispatch queue (as before): libdispatch lets an idle worker thread exit after 5 s, and a phone
/// dictates in phrases with longer pauses than that, so after each pause the fsync's worker was created again
/// (clone3, rseq, set_robust_list, prctl, setpriority, 4 rt_sigprocmask, a madvise at its exit: about 10 system
/// calls and a thread's start-up per line, measured at 7 s pacing). This thread sleeps between fsyncs
/// instead: a line costs the same futex wake and wait as a dispatch worker's, whatever the pause.
///
/// Flow: `submit` hands over a descriptor (a dup of the journal's, so the journal may be cut or closed meanwhile)
/// and wakes the thread, started on first use (a `send --text` that syncs inline at its end starts none); the thread
/// fsyncs the latest descriptor of what is waiting (one fsync covers every write made before it through any of
/// them) and closes them all. `drain` waits until everything submitted is on disk.
///
/// How it sleeps: on a semaphore (a futex wait; `submit` posts it, one futex wake when the thread sleeps). A condition
/// variable woken by broadcast cost a third futex call a line (glibc's group switch), and a `drain` waiting on the
/// same condition could take a signal meant for the thread; `drain` waits on a semaphore of its own.
///
/// `@unchecked Sendable`: `pending`, `busy`, `started` and `drainers` are read and written only with `lock` held;
/// the semaphores are thread-safe.
final class JournalSyncer: @unchecked Sendable {
    private let lock = ThreadLock()
    private let work = DispatchSemaphore(value: 0)
    private var pending: [Int32] = []
    private var busy = false
    private var started = false
    private var drainers: [DispatchSemaphore] = []

    /// Fsyncs and closes `fd` on the syncer's thread (inline, if that thread cannot be created).
    func submit(_ fd: Int32) {
        let start = lock.withLock {
            pending.append(fd)
            defer { started = true }
            return !started
        }
        work.signal()
        if start && !Threads.start(name: "sb-fsync", { [self] in run() }) {
            lock.withLock { started = false }
            syncPending()  // no thread: durability first
        }
    }

    /// Returns once every descriptor submitted before the call is fsynced and closed.
    func drain() {
        let done = DispatchSemaphore(value: 0)
        let wait: Bool = lock.withLock {
            guard started, busy || !pending.isEmpty else { return false }
            drainers.append(done)
            return true
        }
        if wait { done.wait() } else { syncPending() }  // no thread: whatever is pending, here (usually nothing)
    }

    private func run() {
        while true {
            work.wait()
            let batch: [Int32] = lock.withLock {
                busy = true
                defer { pending.removeAll(keepingCapacity: true) }
                return pending
            }
            Self.sync(batch)
            let done: [DispatchSemaphore] = lock.withLock {
                busy = false
                guard pending.isEmpty else { return [] }  // more came: the next round ends the drain
                defer { drainers.removeAll() }
                return drainers
            }
            for drainer in done { drainer.signal() }
        }
    }

    /// What is pending, on the calling thread (no syncer thread).
    private func syncPending() {
        let batch: [Int32] = lock.withLock {
            defer { pending.removeAll() }
            return pending
        }
        Self.sync(batch)
    }

    private static func sync(_ batch: [Int32]) {
        guard let last = batch.last else { return }
        fsync(last)
        Trace.mark("jsync")
        for fd in batch { close(fd) }
    }
}
