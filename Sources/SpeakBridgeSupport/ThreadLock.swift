// A plain pthread mutex with lock/unlock, and a condition variable on top of one: for code that takes and drops
// a lock around a loop (a worker that waits for work, a log that unlocks to fsync). New state should live in a
// `Locked` instead; these exist so that no part of the `speakbridge` binary needs Foundation's NSLock and
// NSCondition (Foundation drags in ICU, most of the release binary, and MiB of resident memory: issue 13).
//
// Why pthread, not Synchronization.Mutex: see Locked.swift (ThreadSanitizer sees pthread mutexes).
#if canImport(Glibc)
import Glibc
#endif

/// A non-recursive mutual-exclusion lock (the shape of Foundation's NSLock).
///
/// `@unchecked Sendable` is sound: the only stored state is the pthread mutex, at a fixed heap address (as pthread
/// requires) for the life of the object, and it is only used through pthread calls, which are thread-safe.
public final class ThreadLock: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    @inlinable public func lock() { pthread_mutex_lock(mutex) }

    @inlinable public func unlock() { pthread_mutex_unlock(mutex) }

    /// Runs `body` with the lock held (inlinable: specialized where it is called, no closure context).
    @inlinable
    public func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// A mutex and a condition variable (the shape of Foundation's NSCondition): `wait()` must be called with the
/// lock held, releases it while asleep and holds it again when it returns; it may return spuriously, so callers
/// wait in a loop on their predicate.
///
/// `@unchecked Sendable` is sound: the stored state is the lock (itself Sendable) and the pthread condition at a
/// fixed heap address for the life of the object, used only through pthread calls.
public final class ThreadCondition: @unchecked Sendable {
    private let mutex = ThreadLock()
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    public init() {
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        // Timed waits (`wait(untilMonotonic:)`) count on CLOCK_MONOTONIC: a wall-clock step must not stretch them.
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        let status = pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
        precondition(status == 0, "pthread_cond_init failed: \(status)")
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deinitialize(count: 1)
        condition.deallocate()
    }

    public func lock() { mutex.lock() }

    public func unlock() { mutex.unlock() }

    /// Runs `body` with the lock held.
    public func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        try mutex.withLock(body)
    }

    /// Sleeps until signalled (or spuriously woken). The caller holds the lock.
    public func wait() { pthread_cond_wait(condition, mutex.mutex) }

    /// Sleeps until signalled, spuriously woken, or CLOCK_MONOTONIC reaches `deadline` (nanoseconds, see
    /// `monotonicNanoseconds`). The caller holds the lock.
    public func wait(untilMonotonic deadline: UInt64) {
        var time = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        _ = pthread_cond_timedwait(condition, mutex.mutex, &time)
    }

    /// CLOCK_MONOTONIC in nanoseconds: the clock `wait(untilMonotonic:)` counts on.
    public static var monotonicNanoseconds: UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
    }

    /// Wakes one waiter.
    public func signal() { pthread_cond_signal(condition) }

    /// Wakes every waiter.
    public func broadcast() { pthread_cond_broadcast(condition) }
}
