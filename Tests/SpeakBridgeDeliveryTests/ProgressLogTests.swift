#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
import SpeakBridgeStore
@testable import SpeakBridgeDelivery

/// The progress log: replay order, retirement, revocation, and compaction that never loses a record.
@Suite("Progress log")
struct ProgressLogTests: ProgressLogFixture {
    let root = "/tmp/sb-progress-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    func lines() throws -> [Substring] {
        String(decoding: try #require(try LogFile.readRecords(path)), as: UTF8.self).split(separator: "\n")
    }

    @Test func theLastRecordWinsOnReplaySoARollbackSurvivesARestart() throws {
        try prepare()
        defer { cleanup() }
        do {
            let log = try ProgressLog(path: path)
            try log.record(sink: "stdout", device: device, session: "s", seq: 9)
            try log.record(sink: "stdout", device: device, session: "s", seq: 7)  // write failed: rolled back
        }
        #expect(try ProgressLog(path: path).progress(sink: "stdout", device: device, session: "s") == 7)
    }

    @Test func aRetiredSessionKeepsOnlyItsLevelAcrossARestartAndComesBackOnARecord() throws {
        try prepare()
        defer { cleanup() }
        do {
            let log = try ProgressLog(path: path)
            try log.record(sink: "stdout", device: device, session: "old", seq: 5)
            try log.record(sink: "fifo:/x", device: device, session: "old", seq: 5)
            try log.record(sink: "stdout", device: device, session: "kept", seq: 2)
            try log.retire(device: device, session: "old", delivered: 5)
            #expect(log.progress(sink: "stdout", device: device, session: "old") == nil)
        }
        do {
            let log = try ProgressLog(path: path)
            #expect(log.retiredEntries() == [device: ["old": 5]])
            #expect(log.entries().count == 1)
            #expect(try lines().count == 2)  // compacted on open: one retired line, one live line
            try log.record(sink: "stdout", device: device, session: "old", seq: 6)  // the session came back
            #expect(log.retiredEntries().isEmpty)
        }
        let log = try ProgressLog(path: path)
        #expect(log.progress(sink: "stdout", device: device, session: "old") == 6)
        #expect(log.retiredEntries().isEmpty)
    }

    @Test func forgettingADeviceIsOneLineAndDurable() throws {
        try prepare()
        defer { cleanup() }
        do {
            let log = try ProgressLog(path: path)
            for i in 0..<50 { try log.record(sink: "stdout", device: device, session: "s\(i)", seq: 1) }
            try log.retire(device: device, session: "s0", delivered: 1)
            try log.record(sink: "stdout", device: other, session: "x", seq: 3)
            let before = try lines().count
            try log.forget(device: device)
            #expect(try lines().count == before + 1)
            #expect(log.entries().keys.allSatisfy { $0.device == other })
        }
        let log = try ProgressLog(path: path)
        #expect(log.entries().count == 1)
        #expect(log.retiredEntries().isEmpty)
    }

    /// Records keep going (from another thread) while a compaction writes its snapshot; none is lost, and the
    /// compacted file holds one line per key.
    @Test func compactionWhileRecordingLosesNothing() throws {
        try prepare()
        defer { cleanup() }
        let log = try ProgressLog(path: path)
        log.lock.withLock { log.compactAfterBytes = 1 }
        let sessions = 300
        let rounds: UInt64 = 40
        let done = NSCondition()
        nonisolated(unsafe) var finished = false  // guarded by `done`
        let writer = Thread { [device] in
            for seq in 1...rounds {
                for s in 0..<sessions { try? log.record(sink: "stdout", device: device, session: "s\(s)", seq: seq) }
            }
            done.withLock { finished = true }
        }
        writer.start()
        var compactions = 0
        while !done.withLock({ finished }) {
            try log.sync()
            compactions += 1
        }
        try log.sync()
        #expect(compactions > 1)
        let reopened = try ProgressLog(path: path)
        for s in 0..<sessions {
            let level = reopened.progress(sink: "stdout", device: device, session: "s\(s)")
            #expect(level == rounds)
        }
        log.lock.withLock { log.compactAfterBytes = 1 }
        try log.record(sink: "stdout", device: device, session: "s0", seq: rounds)
        try log.sync()
        #expect(try lines().count == sessions)
    }

    /// 30,000 entries (what a device could leave behind before sessions were bounded) load and compact in one
    /// pass, no sorting; the old code sorted every entry by its string form (minutes for 100,000).
    @Test func loadingManyEntriesIsOnePass() throws {
        try prepare()
        defer { cleanup() }
        var text: [UInt8] = []
        for i in 0..<30_000 {
            text += Array("[\"stdout\",\"\(device)\",\"s-\(i)\",\(i % 7 + 1)]\n".utf8)
        }
        try FileIO.atomicWrite(path, text)
        let log = try ProgressLog(path: path)
        #expect(log.entries().count == 30_000)
        // Compared as a plain UInt64: `#expect(optional == literal)` here made ASan report a stack-buffer-overflow
        // inside libswiftCore's _convertToAnyHashable (Swift Testing's expression capture), not in our code.
        let last: UInt64 = log.progress(sink: "stdout", device: device, session: "s-29999") ?? 0
        #expect(last == UInt64(29_999 % 7 + 1))
    }
}
