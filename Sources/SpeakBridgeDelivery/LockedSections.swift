import SpeakBridgeSupport

// `withLock` of `ThreadLock` and `ThreadCondition`, made again here from their public `lock`/`unlock` so that it is
// specialized and inlined in this module: the generic one in SpeakBridgeSupport is a call through an opaque
// closure with the result returned indirectly (about 50 instructions a call, and its body could not be optimized
// with the caller). The delivery path takes these locks about seven times per paced line. Same semantics: the
// lock is held exactly while `body` runs, and released when it returns or throws.

extension ThreadLock {
    @inline(__always)
    func locked<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}

extension ThreadCondition {
    @inline(__always)
    func locked<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}
