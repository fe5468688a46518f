// The application's one timer on the service thread (`WebSocketClient.schedule(after:_:)`), so that
// periodic work (a sender's 50 ms tick) runs in the loop that already sleeps in poll(2): no dispatch
// timer thread (epoll, timerfd, futex), no worker woken, no queue handed between threads per tick.
//
// How: a `.schedule` command reaches the service thread through the inbox like any other (from the
// service thread itself — the usual case, a tick re-arming itself — it needs no wake-up); there it
// arms a timerfd (one timerfd_settime), replacing an earlier schedule not yet fired (a request
// without a handler, `WebSocketClient.cancelSchedule`, disarms it: one timerfd_settime; one marked
// `now`, `WebSocketClient.afterWrites`, runs its handler in that drain, after the sends queued before
// it were written, and leaves the timer alone). The timerfd is
// watched like stdin (ServiceLoop+Watching.swift): poll wakes when it expires, the handler reads it
// and runs the application's handler inside the callback, so what that sends is drained (and
// written) before the loop polls again. The timerfd is closed after the context is destroyed; a
// schedule after the loop stopped is dropped.
//
// Why not an lws_sul timer (tried first): lws 4.1 turns the time to the next sul into poll's timeout
// in whole milliseconds, rounded down, so in the last millisecond before every timer it polls with
// a timeout of 0 again and again until the timer is due (about a dozen poll calls per tick, +0.9
// poll per paced line at 2 ms pacing). A timerfd wakes poll at its expiry.
//
// The fallback: a sender's durability deadlines, lazy-ack reads and redials hang on this timer, so a
// timerfd that cannot be made (timerfd_create fails: EMFILE, ENOMEM), watched (the loop refuses to
// adopt it) or armed (timerfd_settime fails) must not drop a schedule. The loop then logs one warning
// (`WebSocketLog`, naming the errno) and times every later schedule with that lws_sul timer
// (`appFallbackTimer`): it fires on time, at the cost of those extra polls. Never back to the timerfd.
internal import CLibWebSockets
import SpeakBridgeSupport
#if canImport(Glibc)
import Glibc
#endif

/// The application's timer handler, stored as a value (C-LIBRARY-NOTES §6.2). No handler: disarm. `now`: no
/// timer at all, `fire` runs in the drain that carries the request out, after the commands queued before it
/// (`WebSocketClient.afterWrites`), and the timer is left as it is.
struct TimerRequest: Sendable {
    let delayMicroseconds: UInt64
    let fire: (@Sendable () -> Void)?
    var now = false
}

/// Where the application timer's descriptor comes from: a timerfd (`standard`), or, in tests, a stand-in that
/// fails the way the kernel or the loop can (`WebSocketClient(…, timerSource:…)`), to prove the fallback.
/// `open` returns the descriptor or a negated errno.
struct AppTimerSource: Sendable {
    let open: @Sendable () -> Int32

    static let standard = AppTimerSource {
        let fd = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK | TFD_CLOEXEC))
        return fd >= 0 ? fd : -errno
    }
}

extension ServiceLoop {
    /// Arms (or re-arms) the application's timer. Service thread, from `apply`.
    func arm(_ request: TimerRequest) {
        guard context != nil, !stopRequested else { return }
        if request.now {
            request.fire?()
            return
        }
        guard let fire = request.fire else {
            disarm()
            return
        }
        if appTimerFD < 0 && !appTimerFallback { openAppTimer() }
        appTimerHandler = fire
        // At most a day (no peer chose it); at least a microsecond (a zero it_value would disarm the timerfd).
        let delay = max(1, min(request.delayMicroseconds, 86_400_000_000))
        if !appTimerFallback {
            var spec = itimerspec()
            spec.it_value.tv_sec = Int(delay / 1_000_000)
            spec.it_value.tv_nsec = Int(delay % 1_000_000) * 1_000
            if timerfd_settime(appTimerFD, 0, &spec, nil) == 0 { return }
            let code = errno
            fallBack("timerfd_settime failed: \(errnoText(code))")
        }
        appFallbackTimer.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        // lws 4.1 takes a pending sul out of its list before inserting it again; cancelling first keeps that true
        // whatever the version.
        lws_sul_cancel(&appFallbackTimer.pointee.sul)
        lws_sul_schedule(context, 0, &appFallbackTimer.pointee.sul, appFallbackTimerFired, lws_usec_t(delay))
    }

    /// Drops a schedule not yet fired: no wake-up comes for it. Nothing to do when none is armed.
    private func disarm() {
        guard appTimerHandler != nil else { return }
        appTimerHandler = nil
        if appTimerFallback {
            lws_sul_cancel(&appFallbackTimer.pointee.sul)
            return
        }
        guard appTimerFD >= 0 else { return }
        var off = itimerspec()  // a zero it_value disarms
        // A failure here costs at most one wake-up: the handler is gone, so the expiry runs nothing.
        _ = timerfd_settime(appTimerFD, 0, &off, nil)
    }

    /// Creates the timerfd and has the loop watch it (a dup of it, which shares the timer). On failure the loop
    /// falls back to the lws_sul timer (`fallBack`).
    private func openAppTimer() {
        let fd = appTimerSource.open()
        guard fd >= 0 else {
            fallBack("timerfd_create failed: \(errnoText(-fd))")
            return
        }

        // Unowned, not strong: a strong capture would make a cycle through `watches`. Safe: lws calls a watch's
        // handler only on the service thread while the context lives, and `forgetWatches` drops every watch before
        // the context is destroyed, so the loop outlives every call. (Not weak: a weak reference gives the loop a
        // side table that LeakSanitizer reports as leaked when a process exits with its loop still running.)
        let handler = ReadableHandler { [unowned self] _ in
            self.appTimerExpired()
        }
        let request = WatchRequest(id: WebSocketWatchID(rawValue: makeConnectionID().rawValue), fd: fd,
                                   handler: handler)
        guard adopt(request) else {
            Glibc.close(fd)
            fallBack("the service loop could not watch its timerfd")
            return
        }
        appTimerFD = fd
    }

    /// From now on the application's timer is the lws_sul timer; says so once, on the log.
    private func fallBack(_ reason: String) {
        appTimerFallback = true
        let message = "the application timer's timerfd is unusable (\(reason)); timing with an lws timer instead"
        appTimerFallbackReason.withLock { $0 = message }
        swift_lws_log(LLL_WARN, message)
    }

    /// The watched timerfd polled readable (service thread, inside the watch's callback). False ends the watch:
    /// once the loop fell back to the lws timer, the timerfd is not used again.
    private func appTimerExpired() -> Bool {
        var expirations: UInt64 = 0
        // Non-blocking: EAGAIN when a re-arm after the expiry reset it first (then it has not fired yet).
        let got = read(appTimerFD, &expirations, 8)
        guard !appTimerFallback else { return false }
        guard got == 8 else { return true }
        appTimerPassed()
        return true
    }

    /// The timer (timerfd or fallback) expired: its handler runs once (a handler that wants more schedules again).
    func appTimerPassed() {
        guard let fire = appTimerHandler else { return }
        appTimerHandler = nil
        appTimerFires.add(1, ordering: .relaxed)
        fire()
    }

    /// After the context is gone (its copy of the descriptor closed with it).
    func closeAppTimer() {
        if appTimerFD >= 0 {
            Glibc.close(appTimerFD)
            appTimerFD = -1
        }
    }
}

/// `errno 24 (Too many open files)`.
private func errnoText(_ code: Int32) -> String {
    "errno \(code) (\(String(cString: strerror(code))))"
}

/// lws_sul callback for the fallback application timer.
private func appFallbackTimerFired(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul, let owner = swift_lws_timer_owner(sul) else { return }
    // The loop outlives its context, and the timer is cancelled before the context dies (`run`).
    let loop = Unmanaged<ServiceLoop>.fromOpaque(owner).takeUnretainedValue()
    loop.withCallbackScope {
        loop.appTimerPassed()
    }
}
