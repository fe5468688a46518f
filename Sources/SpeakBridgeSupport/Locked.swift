// A value behind a pthread mutex: the one lock type for state that several threads share.
//
// Why not Synchronization.Mutex: on Linux it locks with priority-inheritance futexes, and when it is contended the
// kernel hands ownership straight to the waiting thread, so ThreadSanitizer never sees an acquire and reports a
// race between two `withLock` bodies (Tests/sanitize/mutex-contention.swift reproduces it in ten lines). A
// pthread_mutex_t is intercepted by TSan, so `make sanitize` sees exactly the races there are. Not recursive: a
// `withLock` inside a `withLock` of the same value deadlocks (take a snapshot, unlock, then call out).
#if canImport(Glibc)
import Glibc
#endif

/// Holds `Value`; every access goes through `withLock`.
///
/// `@unchecked Sendable` is sound: `value` is read and written only between `pthread_mutex_lock` and
/// `pthread_mutex_unlock` on `mutex`, which lives (at a fixed heap address, as pthread requires) as long as the
/// object; and `Value` is itself Sendable, so what leaves the lock may cross threads.
public final class Locked<Value: Sendable>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ value: Value) {
        self.value = value
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

    /// Runs `body` with exclusive access to the value.
    public func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
