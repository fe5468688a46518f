extension WebSocketClient {
    /// Lazy (true): the connection's socket is read only when ``receivePending(_:)`` asks, so frames that arrive
    /// meanwhile wait in the kernel instead of waking the service thread one by one (a sender's acks between two
    /// lines). False: read as usual again. Only for an established connection; a peer's close is seen at the next
    /// `receivePending` or when lazy ends (see ServiceLoop+LazyReceive.swift). Takes effect before the loop polls
    /// again; needs no wake-up when called on the service thread.
    public func receiveLazily(_ connection: WebSocketConnectionID, _ lazy: Bool) {
        loop.enqueue(.receiveLazily(connection, lazy))
    }

    /// A lazy connection reads what its socket holds now: lws's next poll returns at once for it (no sleep), and
    /// the connection goes back to lazy once its socket is empty. Nothing when nothing is there.
    public func receivePending(_ connection: WebSocketConnectionID) {
        loop.enqueue(.receivePending(connection))
    }
}
