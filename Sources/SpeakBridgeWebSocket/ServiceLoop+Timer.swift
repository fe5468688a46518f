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
internal import CLibWebSockets
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
        if appTimerFD < 0 && !openAppTimer() { return }
        appTimerHandler = fire
        // At most a day (no peer chose it); at least a nanosecond (a zero it_value would disarm the timer).
        let delay = max(1, min(request.delayMicroseconds, 86_400_000_000))
        var spec = itimerspec()
        spec.it_value.tv_sec = Int(delay / 1_000_000)
        spec.it_value.tv_nsec = Int(delay % 1_000_000) * 1_000
        timerfd_settime(appTimerFD, 0, &spec, nil)
    }

    /// Drops a schedule not yet fired: no wake-up comes for it. Nothing to do when none is armed.
    private func disarm() {
        guard appTimerHandler != nil else { return }
        appTimerHandler = nil
        guard appTimerFD >= 0 else { return }
        var off = itimerspec()  // a zero it_value disarms
        timerfd_settime(appTimerFD, 0, &off, nil)
    }

    /// Creates the timerfd and has the loop watch it (a dup of it, which shares the timer). False: no timer
    /// (the schedule is dropped, like one after the loop stopped).
    private func openAppTimer() -> Bool {
        let fd = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK | TFD_CLOEXEC))
        guard fd >= 0 else { return false }
        // Unowned, not strong: a strong capture would make a cycle through `watches`. Safe: lws calls a watch's
        // handler only on the service thread while the context lives, and `forgetWatches` drops every watch before
        // the context is destroyed, so the loop outlives every call. (Not weak: a weak reference gives the loop a
        // side table that LeakSanitizer reports as leaked when a process exits with its loop still running.)
        let handler = ReadableHandler { [unowned self] _ in
            self.appTimerExpired()
            return true
        }
        let request = WatchRequest(id: WebSocketWatchID(rawValue: makeConnectionID().rawValue), fd: fd,
                                   handler: handler)
        guard adopt(request) else {
            Glibc.close(fd)
            return false
        }
        appTimerFD = fd
        return true
    }

    /// The watched timerfd polled readable (service thread, inside the watch's callback).
    private func appTimerExpired() {
        var expirations: UInt64 = 0
        // Non-blocking: EAGAIN when a re-arm after the expiry reset it first (then it has not fired yet).
        guard read(appTimerFD, &expirations, 8) == 8 else { return }
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
