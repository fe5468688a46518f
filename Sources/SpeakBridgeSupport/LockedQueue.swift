// A serial domain that a hot thread enters in place: one lock, and a serial dispatch queue for the work of threads
// that must not wait (or must run later). What `DispatchQueue.sync` gave the socket threads of `send` and `serve`,
// without its cost: the Swift overlay copies each `sync` closure into a heap block (`_Block_copy`, an allocation,
// `_Block_release`), about 800 instructions a call — a paced line's frame and its ack each paid it (issue 13).
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Work that runs one piece at a time: `sync` runs it on the calling thread holding the lock (it waits while
/// another piece runs); `async` and `asyncAfter` run it later on `dispatchQueue`, holding the same lock. So "on the queue"
/// means "holding the lock", whichever thread that is.
///
/// As with `DispatchQueue.sync` on the queue itself, entering again from the thread that is inside is a bug: it
/// traps (`sync` checks the owner), never a silent deadlock. Unlike a queue, a `sync` does not wait for pieces
/// queued by `async` before it: they are ordered among themselves, and each runs whole, but a `sync` may come
/// between them. Nothing here relied on more: what the users post (a journal-sync failure, a notice, mDNS
/// results, a timed end, the desktop's events from its effect queues) comes at a time unrelated to what runs with
/// `sync`, so a queue's order promised nothing more; and what `sync` runs that depends on a post (a socket event
/// after the dial the post made) comes after it by cause.
///
/// `@unchecked Sendable` is sound: `lock` is a thread-safe pthread mutex, `owner` an atomic, `dispatchQueue` a
/// thread-safe dispatch queue; nothing else is stored.
public final class LockedQueue: @unchecked Sendable {
    /// Runs the `async` pieces (and timers made on it, whose handlers must enter through `sync`).
    public let dispatchQueue: DispatchQueue
    @usableFromInline let lock = ThreadLock()
    /// The thread inside (`pthread_self`), 0 when none: a second `sync` on it traps instead of hanging.
    @usableFromInline let owner = Atomic<UInt>(0)

    public init(label: String) {
        dispatchQueue = DispatchQueue(label: label)
    }

    /// Runs `body` on this thread, holding the lock. Traps when this thread is inside already.
    @inlinable @inline(__always)
    public func sync<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        let me = UInt(pthread_self())
        precondition(owner.load(ordering: .relaxed) != me, "LockedQueue: entered twice on one thread")
        lock.lock()
        owner.store(me, ordering: .relaxed)
        defer {
            owner.store(0, ordering: .relaxed)
            lock.unlock()
        }
        return try body()
    }

    /// Runs `work` later on `dispatchQueue`, holding the lock; pieces posted this way run in the order they were
    /// posted.
    public func async(_ work: @escaping @Sendable () -> Void) {
        dispatchQueue.async { self.sync(work) }
    }

    /// Runs `work` on `dispatchQueue` after `delay`, holding the lock.
    public func asyncAfter(_ delay: Duration, _ work: @escaping @Sendable () -> Void) {
        let (seconds, attoseconds) = delay.components
        // Saturating: a delay past Int.max nanoseconds (292 years) waits "forever", it does not wrap to the past.
        let (whole, overflow) = Int(clamping: Swift.max(0, seconds)).multipliedReportingOverflow(by: 1_000_000_000)
        let (sum, carried) = whole.addingReportingOverflow(Swift.max(0, Int(attoseconds / 1_000_000_000)))
        let nanoseconds = overflow || carried ? Int.max : sum
        dispatchQueue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { self.sync(work) }
    }

    /// Whether the calling thread is inside (for preconditions).
    public var isHeldByCurrentThread: Bool { owner.load(ordering: .relaxed) == UInt(pthread_self()) }
}
