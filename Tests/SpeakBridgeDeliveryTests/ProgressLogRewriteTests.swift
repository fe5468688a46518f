#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
import SpeakBridgeStore
@testable import SpeakBridgeDelivery

/// After a failed sync the progress log is never synced again but rewritten from memory (`ProgressLog.sync`,
/// `mustRewrite`). A failing disk is Tests/EndToEndTests/FsyncFailureTests.swift's (FUSE); here the flag a failed
/// sync sets is set directly, to pin what the next sync does with it.
@Suite("Progress log: rewrite after a failed sync")
struct ProgressLogRewriteTests: ProgressLogFixture {
    let root = "/tmp/sb-progress-rewrite-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    func inode() -> UInt64 {
        var info = stat()
        return stat(path, &info) == 0 ? UInt64(info.st_ino) : 0
    }

    @Test("the sync after a failure writes a new file (every record kept), and the one after it is a plain sync")
    func syncAfterFailureRewrites() throws {
        try prepare()
        defer { cleanup() }
        do {
            let log = try ProgressLog(path: path)
            try log.record(sink: "stdout", device: device, session: "s", seq: 3)
            try log.retire(device: other, session: "old", delivered: 5)
            try log.sync()
            let first = inode()
            try log.record(sink: "stdout", device: device, session: "s", seq: 4)
            log.lock.withLock { log.mustRewrite = true }  // what a failed `handle.sync()` leaves
            try log.sync()
            #expect(inode() != first, "a new file renamed over the log")
            #expect(log.lock.withLock { log.mustRewrite } == false)
            #expect(log.syncStatus.durableLines >= 3)
            let second = inode()
            try log.record(sink: "stdout", device: device, session: "s", seq: 5)
            try log.sync()
            #expect(inode() == second, "trusted again: an ordinary sync")
        }
        let reopened = try ProgressLog(path: path)
        #expect(reopened.progress(sink: "stdout", device: device, session: "s") == 5)
        #expect(reopened.retiredEntries()[other]?["old"] == 5)
    }
}
