/// `Sender` reads its acks between lines while lines keep coming: one wake-up a line, not two.
///
/// The desktop acks after each group commit, so at a human pace every line's ack comes on its own, a few
/// milliseconds after the line, and woke this process a second time (with 100 devices on one CPU, the acks of one
/// group commit woke 20 of them at the same instant, and the next lines queued behind them: the worst devices'
/// latency tail). An ack is only needed to drop the line from the journal, so while lines keep coming:
/// 1. After a line is sent (`lineSent`) on a resumed connection with room in the window, the connection is read
///    lazily (`LinkDriver.receiveLazily`): acks wait in the kernel's buffer, and what has come since the last line
///    is read right now, in this wake-up (`receivePending`: no sleep) — at most every `ackLookSeconds`.
/// 2. The tick is not needed every 50 ms meanwhile: once no journal write is owed durability, it is armed for
///    `lazyAckSeconds` after the last line (`scheduleLazyTick`); an owed write brings it to that write's deadline
///    (`owe`, Sender+Clock.swift), so every write is still fsynced or acknowledged within 50 ms.
/// 3. When no line came for `lazyAckSeconds` (that tick), at the end of input, with a status line on a terminal,
///    with an explicit `--timeout` (its check must see every ack that came) or with the window half full, acks are
///    read as they come again (`readAcksNow`); a closed connection ends it too.
/// What waits: an ack at most `lazyAckSeconds` (the journal keeps the line meanwhile, as it does until any ack), a
/// desktop's `held` notice or close of the connection the same (a reset is seen at once). Nothing is lost or sent
/// twice: acks are read later, never dropped.
extension Sender {
    static let lazyAckSeconds = 0.5
    /// Least time between two looks for waiting acks (`receivePending`, one recv(2)): the desktop acks at most
    /// every 25 ms while lines keep coming, so at a fast pace most lines need not look.
    static let ackLookSeconds = 0.01

    /// After a line's journal write and frame (on `queue`).
    func lineSent(at: Double) {
        lastLineAt = at
        guard let id = core.link.chosen, readsAcksLazily else {
            readAcksNow()
            return
        }
        if lazyOn != id {
            if let old = lazyOn { driver.receiveLazily(old, false) }
            driver.receiveLazily(id, true)
            lazyOn = id
        }
        if at - lastAckLookAt >= Self.ackLookSeconds {
            lastAckLookAt = at
            driver.receivePending(id)
        }
    }

    /// Whether acks may wait for the next line: connected and resumed, every line sent, the window at most half
    /// full, no explicit time limit, no live status line.
    var readsAcksLazily: Bool {
        core.exitCode == nil && core.link.isEstablished && core.window.sendsNextAlone
            && core.window.pendingCount <= core.window.maxInFlight / 2 && (options.timeout ?? 0) <= 0 && !status.isTerminal
    }

    /// Acks are read as they come from now on.
    func readAcksNow() {
        guard let id = lazyOn else { return }
        lazyOn = nil
        driver.receiveLazily(id, false)
    }

    /// While acks are read lazily and no fsync is owed: the tick at `lazyAckSeconds` after the last line (at least
    /// a tick from now), instead of every 50 ms. False (nothing armed) otherwise.
    func scheduleLazyTick() -> Bool {
        guard lazyOn != nil, !needsSync, core.exitCode == nil else { return false }
        let delay = max(lastLineAt + Self.lazyAckSeconds - now, Self.tickSeconds)
        tickAt = now + delay
        driver.schedule(after: .nanoseconds(Int64(delay * 1e9)), tickWork)
        return true
    }
}
