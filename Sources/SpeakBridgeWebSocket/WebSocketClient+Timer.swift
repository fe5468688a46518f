extension WebSocketClient {
    /// Drops the ``schedule(after:_:)`` timer if it has not fired: its `fire` is not called and the loop does not
    /// wake for it (the timerfd is disarmed, one timerfd_settime; nothing when none is armed). Like `schedule`,
    /// needs no wake-up when called on the service thread, and takes effect before the loop polls again. A
    /// `schedule` after it arms the timer again.
    public func cancelSchedule() {
        loop.enqueue(.schedule(TimerRequest(delayMicroseconds: 0, fire: nil)))
    }
}
