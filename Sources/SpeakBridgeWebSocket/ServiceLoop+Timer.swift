// The application's one timer on the service thread (`WebSocketClient.schedule(after:_:)`), so that
// periodic work (a sender's 50 ms tick) runs in the loop that already sleeps in poll(2): no dispatch
// timer thread (epoll, timerfd), no worker woken, no lock handed between threads per tick.
//
// How: a `.schedule` command reaches the service thread through the inbox like any other (from the
// service thread itself — the usual case, a tick re-arming itself — it needs no wake-up); there it
// points an lws_sul timer (`appTimer`) at the delay, replacing an earlier one not yet fired. lws
// folds the timer into its poll timeout; when it fires, the handler runs inside a callback scope, so
// what it sends is drained (and written) before the loop polls again. The timer is cancelled before
// the context is destroyed; a schedule after the loop stopped is dropped.
internal import CLibWebSockets

/// The application's timer handler, stored as a value (C-LIBRARY-NOTES §6.2).
struct TimerRequest: Sendable {
    let delayMicroseconds: UInt64
    let fire: @Sendable () -> Void
}

extension ServiceLoop {
    /// Arms (or re-arms) the application's timer. Service thread, from `apply`.
    func arm(_ request: TimerRequest) {
        guard let context else { return }
        appTimerHandler = request.fire
        appTimer.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        // lws_sul_schedule takes a signed 64-bit count; anything past a day is clamped (no peer chose it).
        let delay = lws_usec_t(min(request.delayMicroseconds, 86_400_000_000))
        lws_sul_schedule(context, 0, &appTimer.pointee.sul, appTimerFired, delay)
    }

    /// The timer fired: its handler runs once (a handler that wants more schedules again).
    func appTimerPassed() {
        guard let fire = appTimerHandler else { return }
        appTimerHandler = nil
        appTimerFires.add(1, ordering: .relaxed)
        fire()
    }
}

/// lws_sul callback for the application's timer.
private func appTimerFired(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul, let owner = swift_lws_timer_owner(sul) else { return }
    // The loop outlives its context, and the timer is cancelled before the context dies.
    let loop = Unmanaged<ServiceLoop>.fromOpaque(owner).takeUnretainedValue()
    loop.withCallbackScope {
        loop.appTimerPassed()
    }
}
