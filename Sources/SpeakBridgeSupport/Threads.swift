// Starting a detached thread and sleeping on one, over pthreads: what the binary used Foundation's Thread for.
#if canImport(Glibc)
import Glibc
#endif

public enum Threads {
    /// Starts `body` on a new detached thread, named `name` if given (an ASCII name of at most 15 bytes, the
    /// kernel's limit; unnamed, it keeps the process's name).
    /// Returns false when the thread could not be created (pthread_create failed: out of threads or memory); the
    /// body then never runs.
    @discardableResult
    public static func start(name: String? = nil, _ body: @escaping @Sendable () -> Void) -> Bool {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        // The new thread owns one retain of the box until it has taken the body out.
        let argument = Unmanaged.passRetained(ThreadBody(name: name, body: body)).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(&thread, &attributes, threadEntry, argument)
        guard status == 0 else {
            Unmanaged<ThreadBody>.fromOpaque(argument).release()
            return false
        }
        return true
    }

    /// Sleeps the calling thread for `seconds` (again after a signal interrupts it, for the time left).
    public static func sleep(seconds: Double) {
        let whole = seconds.rounded(.down)
        var request = timespec(tv_sec: Int(whole), tv_nsec: Int((seconds - whole) * 1_000_000_000))
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
    }
}

/// What a new thread runs: immutable once made, so it may cross to the new thread.
private final class ThreadBody: Sendable {
    let name: String?
    let body: @Sendable () -> Void

    init(name: String?, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }
}

/// The pthread entry point: takes the retain `start` passed, names the thread, runs the body.
private func threadEntry(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    // `argument` is the opaque pointer `Threads.start` made with passRetained; it is non-nil by construction.
    guard let argument else { return nil }
    let box = Unmanaged<ThreadBody>.fromOpaque(argument).takeRetainedValue()
    if let name = box.name { nameThisThread(name) }
    box.body()
    return nil
}

/// Sets the calling thread's name (what `top -H` and /proc/PID/task/TID/comm show). pthread_setname_np is not
/// visible to Swift (it needs _GNU_SOURCE), so the name is written where it would write it. Best effort: without
/// /proc the thread keeps the process's name.
private func nameThisThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}
