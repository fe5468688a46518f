import SpeakBridgeSupport
import Testing
@testable import SpeakBridgeWebSocket
#if canImport(Glibc)
import Glibc
#endif

/// `WebSocketClient.schedule(after:_:)`: the application's one timer (a sender's tick), a timerfd the loop polls with
/// its sockets, run on the service thread, never on another thread.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct ServiceTimerTests {
    /// It fires once, after the delay, on the service thread; a handler that schedules again keeps a tick going,
    /// and one that does not stops it.
    @Test func firesOnTheServiceThreadAndReArmsItself() async throws {
        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        defer { client.shutdown() }
        let threads = Locked<[Int32]>([])
        let started = ContinuousClock.now
        let firedAt = Locked<[Duration]>([])
        let ticks = 5
        @Sendable func fire() {
            threads.withLock { $0.append(WatchTests.Reader.threadID()) }
            let count = firedAt.withLock { times in
                times.append(ContinuousClock.now - started)
                return times.count
            }
            if count < ticks { client.schedule(after: .milliseconds(20), fire) }
        }
        client.schedule(after: .milliseconds(20), fire)
        let clock = ContinuousClock()
        let end = clock.now + .seconds(5)
        while firedAt.value.count < ticks, clock.now < end { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(150))  // time for a sixth, which must not come
        #expect(firedAt.value.count == ticks)
        #expect(client.timerFireCount == ticks)
        #expect(threads.value == Array(repeating: client.serviceThreadID, count: ticks))
        // It waited its delay at least.
        #expect(firedAt.value.first.map { $0 >= .milliseconds(20) } == true)
    }

    /// Scheduling again before it fired replaces the schedule: one fire, at the later time's handler.
    @Test func aNewScheduleReplacesOneNotFired() async throws {
        let client = try WebSocketClient(onEvent: { _ in })
        defer { client.shutdown() }
        let fired = Locked<[Int]>([])
        client.schedule(after: .milliseconds(30)) { fired.withLock { $0.append(1) } }
        client.schedule(after: .milliseconds(60)) { fired.withLock { $0.append(2) } }
        try await Task.sleep(for: .milliseconds(300))
        #expect(fired.value == [2])
    }

    /// What the handler sends goes out (the loop drains after it, before it polls again).
    @Test func sendsFromTheHandlerGoOut() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (id, serverSide) = try await link.connectAuthenticated()
        let client = link.client
        link.client.schedule(after: .milliseconds(10)) { client.send([7, 7], on: id) }
        #expect(await link.serverLog.wait { link.serverLog.messages(serverSide, $0) == [[7, 7]] })
    }

    /// A timer still armed at shutdown never fires, and the shutdown does not wait for it.
    @Test func shutdownDropsAnArmedTimer() async throws {
        let client = try WebSocketClient(onEvent: { _ in })
        let fired = Locked(false)
        client.schedule(after: .seconds(30)) { fired.value = true }
        let clock = ContinuousClock()
        let before = clock.now
        client.shutdown()
        #expect(clock.now - before < .seconds(20))  // not the 30 s timer
        client.schedule(after: .milliseconds(1)) { fired.value = true }  // after shutdown: dropped
        try await Task.sleep(for: .milliseconds(50))
        #expect(!fired.value)
    }
}

/// `WebSocketClient.cancelSchedule()`: a sender whose line was acknowledged before its tick drops the tick, so the
/// loop does not wake for it.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct ServiceTimerCancelTests {
    @Test func aCancelledScheduleNeverFiresAndANewOneDoes() async throws {
        let client = try WebSocketClient(onEvent: { _ in })
        defer { client.shutdown() }
        let fired = Locked<[Int]>([])
        client.schedule(after: .milliseconds(30)) { fired.withLock { $0.append(1) } }
        client.cancelSchedule()
        try await Task.sleep(for: .milliseconds(200))
        #expect(fired.value == [])
        #expect(client.timerFireCount == 0)
        client.cancelSchedule()  // none armed: nothing happens
        client.schedule(after: .milliseconds(20)) { fired.withLock { $0.append(2) } }
        let clock = ContinuousClock()
        let end = clock.now + .seconds(5)
        while fired.value.isEmpty, clock.now < end { try await Task.sleep(for: .milliseconds(10)) }
        #expect(fired.value == [2])
    }

    /// Cancelled from the service thread itself (where a sender's ack is handled): the timer it armed in the same
    /// callback does not fire either.
    @Test func cancelledOnTheServiceThread() async throws {
        let client = try WebSocketClient(onEvent: { _ in })
        defer { client.shutdown() }
        let fired = Locked<[Int]>([])
        client.schedule(after: .milliseconds(10)) {
            fired.withLock { $0.append(1) }
            client.schedule(after: .milliseconds(30)) { fired.withLock { $0.append(2) } }
            client.cancelSchedule()
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(fired.value == [1])
        #expect(client.timerFireCount == 1)
    }
}

/// `WebSocketClient.afterWrites(_:)`: work run on the service thread once the commands before it (a line's frame)
/// are carried out, without touching the application's timer.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct ServiceAfterWritesTests {
    @Test func runsOnceOnTheServiceThreadAfterTheFrameBeforeItAndLeavesTheTimerArmed() async throws {
        let link = try Loopback()
        defer { link.shutdown() }
        let (id, serverSide) = try await link.connectAuthenticated()
        let client = link.client
        let ran = Locked<[Int32]>([])
        let fired = Locked(0)
        client.schedule(after: .milliseconds(40)) { fired.withLock { $0 += 1 } }
        client.send([1], on: id)
        client.afterWrites {
            ran.withLock { $0.append(WatchTests.Reader.threadID()) }
            client.send([2], on: id)  // from the service thread: after the frame before it
        }
        #expect(await link.serverLog.wait { link.serverLog.messages(serverSide, $0) == [[1], [2]] })
        let clock = ContinuousClock()
        let end = clock.now + .seconds(5)
        while fired.value == 0, clock.now < end { try await Task.sleep(for: .milliseconds(10)) }
        #expect(ran.value == [client.serviceThreadID])
        #expect(fired.value == 1, "the armed timer still fired")
        #expect(client.timerFireCount == 1)
    }
}

/// A timerfd that cannot be made, watched or armed never drops a schedule: the loop says so once
/// (`timerFallbackReason`, the warning it logged, naming the errno) and times every schedule with an lws timer, on
/// the service thread as before (a sender's durability deadlines, lazy-ack reads and redials hang on it). Before, the
/// schedule was dropped without a word and `fire` never ran.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct ServiceTimerFallbackTests {
    /// A tick of `ticks` fires, each re-arming the next, all on the service thread; then a cancelled schedule does
    /// not fire and a new one does.
    func ticksCancelsAndReArms(_ client: WebSocketClient) async throws {
        let threads = Locked<[Int32]>([])
        let ticks = 3
        @Sendable func fire() {
            let count = threads.withLock { threads in
                threads.append(WatchTests.Reader.threadID())
                return threads.count
            }
            if count < ticks { client.schedule(after: .milliseconds(10), fire) }
        }
        client.schedule(after: .milliseconds(10), fire)
        let clock = ContinuousClock()
        var end = clock.now + .seconds(10)
        while threads.value.count < ticks, clock.now < end { try await Task.sleep(for: .milliseconds(10)) }
        #expect(threads.value == Array(repeating: client.serviceThreadID, count: ticks))
        #expect(client.timerFireCount == ticks)

        let fired = Locked<[Int]>([])
        client.schedule(after: .milliseconds(30)) { fired.withLock { $0.append(1) } }
        client.cancelSchedule()
        client.schedule(after: .milliseconds(60)) { fired.withLock { $0.append(2) } }
        end = clock.now + .seconds(10)
        while fired.value.isEmpty, clock.now < end { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(100))  // time for the cancelled one, which must not come
        #expect(fired.value == [2])
    }

    @Test func timerfdCreateFails() async throws {
        let client = try WebSocketClient(timerSource: AppTimerSource { -EMFILE }, onEvent: { _ in })
        defer { client.shutdown() }
        try await ticksCancelsAndReArms(client)
        let reason = try #require(client.timerFallbackReason)
        #expect(reason.contains("timerfd_create failed: errno \(EMFILE) (Too many open files)"))
    }

    /// timerfd_settime fails (EINVAL): the stand-in is a pipe, which the loop watches but cannot arm.
    @Test func timerfdSettimeFails() async throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        let readEnd = ends[0]
        defer { close(ends[1]) }  // the read end is the loop's (closed at its shutdown)
        let client = try WebSocketClient(timerSource: AppTimerSource { readEnd }, onEvent: { _ in })
        defer { client.shutdown() }
        try await ticksCancelsAndReArms(client)
        let reason = try #require(client.timerFallbackReason)
        #expect(reason.contains("timerfd_settime failed: errno \(EINVAL) (Invalid argument)"))
    }

    /// The loop cannot adopt the descriptor (the stand-in is a number no descriptor has, so its dup fails).
    @Test func theLoopCannotWatchTheTimerfd() async throws {
        let client = try WebSocketClient(timerSource: AppTimerSource { 1 << 24 }, onEvent: { _ in })
        defer { client.shutdown() }
        try await ticksCancelsAndReArms(client)
        #expect(client.timerFallbackReason?.contains("could not watch its timerfd") == true)
    }

    /// The timerfd works: no fallback, nothing logged.
    @Test func aWorkingTimerfdDoesNotFallBack() async throws {
        let client = try WebSocketClient(onEvent: { _ in })
        defer { client.shutdown() }
        try await ticksCancelsAndReArms(client)
        #expect(client.timerFallbackReason == nil)
    }
}
