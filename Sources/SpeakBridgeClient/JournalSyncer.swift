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
/// Flow: `submit` asks for an fsync of the journal and wakes the thread, started on first use (a `send --text` that
/// syncs inline at its end starts none). The thread fsyncs its own duplicate of the journal's descriptor, taken at
/// the first `submit` and kept for the process's life: the journal keeps its one descriptor for the whole run
/// (never reopened), and the duplicate shares its open file, so an fsync through it covers every write made through
/// the journal before it — no dup(2) and close(2) per line. Requests that come while an fsync runs are served by one
/// more fsync. `drain` waits until every request made before it is on disk.
///
/// Which sync: the journal is a `LogFile` (records written in place inside zero padding), so a sync is an
/// fdatasync(2) while the file keeps its size, and a full fsync when the size differs from what the last full one
/// saw (after the journal grew, and the first sync of the run): `LogFile.sync(descriptor:fullSyncSize:)`.
///
/// How it sleeps: on a semaphore (a futex wait; `submit` posts it, one futex wake when the thread sleeps). A condition
/// variable woken by broadcast cost a third futex call a line (glibc's group switch), and a `drain` waiting on the
/// same condition could take a signal meant for the thread; `drain` waits on a semaphore of its own.
///
/// `@unchecked Sendable`: `handle`, `requested`, `busy`, `started`, `drainers` and `fullSyncSize` are read and
/// written only with `lock` held; the semaphores are thread-safe.
final class JournalSyncer: @unchecked Sendable {
    private let lock = ThreadLock()
    private let work = DispatchSemaphore(value: 0)
    private var handle: Int32 = -1
    private var requested = false
    private var busy = false
    private var started = false
    private var drainers: [DispatchSemaphore] = []
    /// The journal's size at the last full fsync (-1: none yet).
    private var fullSyncSize: Int64 = -1
    /// (full fsyncs, fdatasyncs) done, for tests.
    var counts: (full: Int, data: Int) { lock.withLock { countsValue } }
    private var countsValue = (full: 0, data: 0)

    /// Has the journal fsynced on the syncer's thread (inline, if that thread cannot be created). `duplicate` gives a
    /// duplicate of the journal's descriptor (-1 if it cannot); called until one is had, on the caller's thread.
    /// False: no descriptor (out of descriptors), nothing requested — the caller fsyncs the journal itself.
    func submit(duplicate: () -> Int32) -> Bool {
        let start: Bool? = lock.withLock {
            if handle < 0 { handle = duplicate() }
            guard handle >= 0 else { return nil }
            requested = true
            defer { started = true }
            return !started
        }
        guard let start else { return false }
        work.signal()
        if start && !Threads.start(name: "sb-fsync", { [self] in run() }) {
            lock.withLock { started = false }
            syncInline()  // no thread: durability first
        }
        return true
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
            let fd: Int32 = lock.withLock {
                guard requested else { return -1 }  // a post whose request an earlier round served
                requested = false
                busy = true
                return handle
            }
            if fd >= 0 { sync(fd) }
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
        let fd: Int32 = lock.withLock {
            guard requested else { return -1 }
            requested = false
            return handle
        }
        if fd >= 0 { sync(fd) }
    }

    /// One sync at a time (the syncer's thread, or inline when it has none), so `fullSyncSize` is only raced by
    /// `counts`' readers.
    private func sync(_ fd: Int32) {
        var size = lock.withLock { fullSyncSize }
        let kind = LogFile.sync(descriptor: fd, fullSyncSize: &size)
        lock.withLock {
            fullSyncSize = size
            switch kind {
            case .full: countsValue.full += 1
            case .data: countsValue.data += 1
            case nil: break
            }
        }
        Trace.mark("jsync")
    }
}
