#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeTestSupport
import Testing

/// The harness's own children must not hold descriptors of other tests: a FUSE filesystem spawned by one test (30 s
/// and more) inherited the write end of another test's pipe into `send`, whose input then never ended.
@Suite("Test harness: spawned children")
struct SpawnedChildTests {
    @Test("a spawned child holds none of this process's descriptors: a pipe's end is seen while it runs")
    func aChildHoldsNoOtherDescriptor() throws {
        var fds: [Int32] = [-1, -1]
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let child = try SpawnedChild(["/bin/sleep", "5"])
        defer { _ = child.stop() }
        close(fds[1])
        var poller = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
        // The end is there at once unless the child kept a copy of the write end (then: when it exits, 5 s on).
        #expect(poll(&poller, 1, 2_000) == 1 && poller.revents & Int16(POLLHUP) != 0, "the child holds the pipe open")
    }
}
