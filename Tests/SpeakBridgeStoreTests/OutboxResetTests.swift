#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
@testable import SpeakBridgeStore

/// `Outbox.resetIfDrained`: at a clean exit a grown, fully acknowledged journal goes back to its header, so the next
/// `send` does not read every record of the last run before it dials.
@Suite("Outbox: a drained journal is cut back to its header")
struct OutboxResetTests: JournalFixture {
    let root = "/tmp/sb-outbox-reset-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    func size() -> Int { (try? LogFile.readRecords(path))??.count ?? -1 }

    @Test("drained and large: cut to the header; the session and its numbering go on; nothing comes back")
    func drainedJournalIsCut() throws {
        defer { cleanup() }
        var session = ""
        do {
            let outbox = try Outbox(home: home, desktop: device)
            session = outbox.session
            _ = try outbox.append(texts: (1...200).map { "line \($0) with a few dictated words" })
            try outbox.markAcked(200)
            #expect(size() > Outbox.resetAbove)
            #expect(try outbox.resetIfDrained())
            #expect(size() < 160)  // the header alone (session, ack level, reservation)
            // Appending goes on after the header (at the log's new end).
            _ = try outbox.append(texts: ["201"])
        }
        let again = try Outbox(home: home, desktop: device)
        #expect(again.session == session)
        #expect(again.acked == 200)
        #expect(again.pending.map(\.text) == ["201"])
        #expect(again.nextSeq == 202)
    }

    @Test("a chunk not acknowledged, or a small journal: left as it is")
    func undrainedOrSmallIsKept() throws {
        defer { cleanup() }
        do {  // the journal's lock is held while `outbox` lives
            let outbox = try Outbox(home: home, desktop: device)
            _ = try outbox.append(texts: (1...200).map { "line \($0) with a few dictated words" })
            try outbox.markAcked(199)
            let before = size()
            #expect(try !outbox.resetIfDrained())
            #expect(size() == before)
            try outbox.markAcked(200)
            #expect(try outbox.resetIfDrained())
            _ = try outbox.append(texts: ["small"])
            try outbox.markAcked(201)
            let small = size()
            #expect(try !outbox.resetIfDrained())
            #expect(size() == small)
        }
        let again = try Outbox(home: home, desktop: device)
        #expect(again.pending.isEmpty && again.acked == 201 && again.nextSeq == 202)
    }

    @Test("cut but the header never written (a crash right after the truncate): a new session, nothing pending")
    func emptyAfterCrashStartsNewSession() throws {
        defer { cleanup() }
        var session = ""
        do {
            let outbox = try Outbox(home: home, desktop: device)
            session = outbox.session
            _ = try outbox.append(texts: ["a"])
            try outbox.markAcked(1)
        }
        #expect(truncate(path, 0) == 0)
        let again = try Outbox(home: home, desktop: device)
        #expect(again.session != session)
        #expect(again.pending.isEmpty && again.nextSeq == 1)
    }
}
