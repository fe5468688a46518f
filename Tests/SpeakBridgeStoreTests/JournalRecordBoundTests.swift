#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
@testable import SpeakBridgeStore

/// `OutboxWindow.pendingRecordsBound` is what `send`'s running compaction must keep of the journal: it may never be
/// below the bytes the unacknowledged lines' records really take, or a compaction that frees nothing looks worth
/// its rewrite (an estimate of text + 32 bytes a record, 12 below a short line's record, rewrote a 17 MiB journal
/// of unacknowledged lines every 4 MiB while the desktop was away).
@Suite("Journal records: the window's bound is at least what the journal holds")
struct JournalRecordBoundTests: JournalFixture {
    let root = "/tmp/sb-record-bound-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    @Test("short lines, long sequence numbers, controls, bidi marks, multi-byte text, a long line")
    func boundCoversTheRecords() throws {
        defer { cleanup() }
        let outbox = try Outbox(home: home, desktop: device)
        let texts = (1...2_000).map { "line \($0)" } + ["", "\u{1}\u{1f}\u{7f}\t\"\\", "\u{202e}evil\u{2066}\u{85}",
                                                       "naïve 日本語 😀", String(repeating: "x\u{0}", count: 4_000)]
        let before = outbox.log.end
        let chunks = try outbox.append(texts: texts)
        let written = outbox.log.end - before
        let window = OutboxWindow(session: outbox.session, pending: chunks)
        let bound = window.pendingRecordsBound()
        #expect(bound >= written, "bound \(bound) below the \(written) bytes of the records")
        // An upper bound, not a wild one: the short lines' records are most of it.
        #expect(bound < written * 3, "bound \(bound) for \(written) bytes")
    }
}
