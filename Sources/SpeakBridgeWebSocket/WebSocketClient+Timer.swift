extension WebSocketClient {
    /// Drops the ``schedule(after:_:)`` timer if it has not fired: its `fire` is not called and the loop does not
    /// wake for it (the timerfd is disarmed, one timerfd_settime; nothing when none is armed). Like `schedule`,
    /// needs no wake-up when called on the service thread, and takes effect before the loop polls again. A
    /// `schedule` after it arms the timer again.
    public func cancelSchedule() {
        loop.enqueue(.schedule(TimerRequest(delayMicroseconds: 0, fire: nil)))
    }

    /// Runs `work` on the service thread once the commands queued before it are carried out — the frames sent
    /// before it are written (or queued for the socket) by then: work that must not delay a frame (a sender's
    /// journal fsync hand-over) goes after it in the same loop turn, with no timer and no extra wake-up when
    /// called on the service thread. From another thread it rides on the wake-up of the commands before it (or
    /// wakes the loop once). Dropped once the client is shut down. `work` must not block for long, like `onEvent`.
    public func afterWrites(_ work: @escaping @Sendable () -> Void) {
        loop.enqueue(.schedule(TimerRequest(delayMicroseconds: 0, fire: work, now: true)))
    }
}
