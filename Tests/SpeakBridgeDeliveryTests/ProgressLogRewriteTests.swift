#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
import SpeakBridgeStore
import SpeakBridgeTestSupport
@testable import SpeakBridgeDelivery

/// After a failed sync the progress log is never synced again but rewritten from memory (`ProgressLog.sync`,
/// `mustRewrite`). The first test sets the flag a failed sync sets directly, to pin what the next sync does with it;
/// the second runs on a failing disk (`FailingDisk`: FUSE, as in Tests/EndToEndTests/FsyncFailureTests.swift).
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

    @Test("failing disk: a rewrite whose directory fsync fails acknowledges nothing; the next successful one does")
    func failedDirectorySyncKeepsRewriting() throws {
        let disk = try FailingDisk(over: root)
        defer {
            disk.unmount()
            cleanup()
        }
        do {
            let log = try ProgressLog(path: path)
            try log.record(sink: "stdout", device: device, session: "s", seq: 1)
            try log.sync()
            let durable = log.syncStatus.durableLines
            try log.record(sink: "stdout", device: device, session: "s", seq: 2)
            disk.failing = true
            #expect(throws: StoreError.self) { try log.sync() }
            #expect(disk.failedSyncs >= 1)
            #expect(log.lock.withLock { log.mustRewrite })
            disk.failing = false
            // The rewrite: new file written and fsynced, renamed over the log; the directory's fsync fails
            // (`compact` returns .replacedUnsynced), so the sync throws and nothing more is durable.
            disk.failingDirectories = true
            let before = inode()
            #expect(throws: StoreError.self) { try log.sync() }
            #expect(disk.failedDirectorySyncs == 1)
            #expect(inode() != before, "the new file holds the name")
            #expect(log.lock.withLock { log.mustRewrite }, "still untrusted")
            #expect(log.syncStatus.durableLines == durable, "nothing acknowledged")
            disk.failingDirectories = false
            let second = inode()
            try log.sync()
            #expect(inode() != second, "rewritten again, not a plain sync of the file")
            #expect(log.lock.withLock { log.mustRewrite } == false)
            #expect(log.syncStatus.durableLines > durable)
        }
        let reopened = try ProgressLog(path: path)
        #expect(reopened.progress(sink: "stdout", device: device, session: "s") == 2)
    }
}
