#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Testing
import SpeakBridgeSupport

/// `LockedQueue` replaced `DispatchQueue.sync` on the socket threads of `send` and `serve`: it must keep what the
/// queue gave them — one piece at a time, in place on the calling thread, async pieces in order — and turn a second
/// entry on one thread into a trap, as `sync` on its own queue was.
@Suite("LockedQueue")
struct LockedQueueTests {
    @Test("sync runs on the calling thread and returns its value; async and asyncAfter run later, on the queue")
    func syncInPlaceAsyncLater() {
        let queue = LockedQueue(label: "test-locked")
        let me = UInt(pthread_self())
        let (ranOn, wasHeld) = queue.sync { (UInt(pthread_self()), queue.isHeldByCurrentThread) }
        #expect(ranOn == me)
        #expect(wasHeld)
        #expect(!queue.isHeldByCurrentThread)
        let done = DispatchSemaphore(value: 0)
        let seen = Locked<[String]>([])
        queue.asyncAfter(.milliseconds(30)) {
            seen.withLock { $0.append(queue.isHeldByCurrentThread && UInt(pthread_self()) != me ? "after" : "after, wrong") }
            done.signal()
        }
        queue.async {
            seen.withLock { $0.append(queue.isHeldByCurrentThread && UInt(pthread_self()) != me ? "async" : "async, wrong") }
            done.signal()
        }
        done.wait()
        done.wait()
        #expect(seen.withLock { $0 } == ["async", "after"])
    }

    @Test("pieces never overlap: sync from many threads and async pieces, all counting through one unguarded field")
    func mutualExclusion() {
        let queue = LockedQueue(label: "test-locked")
        final class Counter: @unchecked Sendable {  // unguarded on purpose: only `queue` may protect it
            var value = 0
            var inside = false
            var overlaps = 0
            var order: [Int] = []
        }
        let counter = Counter()
        let group = DispatchGroup()
        for _ in 0..<4 {
            group.enter()
            Threads.start(name: "sb-test") {
                for _ in 0..<2_000 {
                    queue.sync {
                        if counter.inside { counter.overlaps += 1 }
                        counter.inside = true
                        counter.value += 1
                        sched_yield()
                        counter.inside = false
                    }
                }
                group.leave()
            }
        }
        for index in 0..<500 {
            group.enter()
            queue.async {
                if counter.inside { counter.overlaps += 1 }
                counter.inside = true
                counter.value += 1
                counter.order.append(index)
                counter.inside = false
                group.leave()
            }
        }
        group.wait()
        queue.sync {
            #expect(counter.value == 4 * 2_000 + 500)
            #expect(counter.overlaps == 0)
            #expect(counter.order == Array(0..<500))  // async pieces keep the order they were posted in
        }
    }

    @Test("asyncAfter with a delay past Int.max nanoseconds waits (saturates), it does not wrap to a past deadline")
    func hugeDelaySaturates() {
        let queue = LockedQueue(label: "test-locked")
        let ran = Locked(false)
        queue.asyncAfter(.seconds(Int64.max)) { ran.withLock { $0 = true } }
        queue.asyncAfter(.seconds(9_300_000_000)) { ran.withLock { $0 = true } }  // × 10^9 just past Int.max
        let later = DispatchSemaphore(value: 0)
        queue.asyncAfter(.milliseconds(200)) { later.signal() }
        later.wait()
        #expect(!ran.withLock { $0 })
    }

    @Test("entering again on the thread that is inside traps (a deadlock with a queue), in a child process")
    func reentryTraps() async {
        await #expect(processExitsWith: .failure) {
            let queue = LockedQueue(label: "test-locked")
            queue.sync { queue.sync { } }
        }
    }
}
