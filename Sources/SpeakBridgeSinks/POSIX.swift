// Small POSIX helpers shared by the sinks: errno text, time budgets, poll, SIGPIPE suppression, framing.
internal import Glibc

enum POSIX {
    /// The C library's text for `err`, e.g. "Broken pipe".
    static func describe(_ err: Int32) -> String {
        String(cString: strerror(err))
    }

    /// `duration` as poll(2) milliseconds, rounded up so a short positive wait never becomes a busy loop.
    static func milliseconds(_ duration: Duration) -> Int32 {
        if duration <= .zero { return 0 }
        let (seconds, attoseconds) = duration.components
        let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: ms)
    }

    /// Polls one descriptor, retrying on EINTR with the remaining time. Returns revents (0 on timeout).
    static func poll(_ fd: Int32, events: Int16, timeout: Duration) -> Int16 {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            var entry = pollfd(fd: fd, events: events, revents: 0)
            let ready = Glibc.poll(&entry, 1, milliseconds(deadline - clock.now))
            if ready > 0 { return entry.revents }
            if ready == 0 { return 0 }
            if errno != EINTR { return Int16(POLLERR) }
        }
    }

    /// Sleeps for `duration` (no busy waiting); an interrupted sleep just ends early.
    static func sleep(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        _ = nanosleep(&request, nil)
    }

    /// Runs `body` with SIGPIPE blocked on this thread, and discards a SIGPIPE that `body` raised.
    ///
    /// Writing to a pipe without readers raises SIGPIPE, which kills the process unless it is ignored. The daemon
    /// ignores it process-wide; this makes the sinks safe even where that was forgotten (tests, other hosts).
    /// A SIGPIPE that was already pending before `body` is left alone.
    static func suppressingSIGPIPE<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        var pipeOnly = sigset_t()
        sigemptyset(&pipeOnly)
        sigaddset(&pipeOnly, SIGPIPE)
        var previousMask = sigset_t()
        pthread_sigmask(SIG_BLOCK, &pipeOnly, &previousMask)
        var pendingBefore = sigset_t()
        sigpending(&pendingBefore)
        let wasPending = sigismember(&pendingBefore, SIGPIPE) == 1
        defer {
            var pending = sigset_t()
            sigpending(&pending)
            if !wasPending, sigismember(&pending, SIGPIPE) == 1 {
                var noWait = timespec(tv_sec: 0, tv_nsec: 0)
                _ = sigtimedwait(&pipeOnly, nil, &noWait)
            }
            pthread_sigmask(SIG_SETMASK, &previousMask, nil)
        }
        return try body()
    }
}

/// Turns texts into the bytes that stdout and FIFO readers see: each text (sanitized unless raw) and "\n".
enum LineFraming {
    static func frames(_ texts: [String], sanitize: Bool) -> [[UInt8]] {
        texts.map { text in
            var bytes = Array((sanitize ? OutputSanitizer.sanitize(text) : text).utf8)
            bytes.append(0x0A)
            return bytes
        }
    }
}
