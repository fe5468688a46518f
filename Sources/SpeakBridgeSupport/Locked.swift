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
/// `@unchecked Sendable` is sound: `value` is read and written only while `mutex` (a `ThreadLock`: a pthread mutex at
/// a fixed heap address for the life of the object) is held; and `Value` is itself Sendable, so what leaves the
/// lock may cross threads.
public final class Locked<Value: Sendable>: @unchecked Sendable {
    // `@usableFromInline` (not `private`) so that `withLock` can be inlined and specialized where it is called:
    // a generic, unspecialized call from another module costs a closure context and generic metadata per call.
    @usableFromInline let mutex = ThreadLock()
    @usableFromInline var value: Value

    public init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value.
    @inlinable
    public func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        mutex.lock()
        defer { mutex.unlock() }
        return try body(&value)
    }
}
