#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
@testable import SpeakBridgeStore

/// `Outbox.rewrite`: a journal whose sync failed is replaced by a new file written from memory (what the sender's
/// window holds unacknowledged), which the next `send` reads back the same; appends go on in the new file.
@Suite("Outbox: rewrite from memory after a failed sync")
struct OutboxRewriteTests: JournalFixture {
    let root = "/tmp/sb-outbox-rewrite-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    func inode() -> UInt64 {
        var info = stat()
        return stat(path, &info) == 0 ? UInt64(info.st_ino) : 0
    }

    @Test("new file: the header with the ack level, the unacknowledged chunks; numbering and appends go on")
    func rewriteKeepsWhatIsUnacknowledged() throws {
        defer { cleanup() }
        var session = ""
        do {
            let outbox = try Outbox(home: home, desktop: device)
            session = outbox.session
            let chunks = try outbox.append(texts: ["one", "two", "three", "four"])
            let old = outbox.log
            let before = inode()
            // The window holds 2...4 (1 acknowledged, its ack record not journaled yet).
            try outbox.rewrite(unacknowledged: Array(chunks.dropFirst()), ack: 1)
            #expect(inode() != before)
            #expect(outbox.log !== old)
            #expect(outbox.acked == 1)
            let five = try outbox.append(text: "five")
            #expect(five.seq == 5)
            try outbox.sync()
        }
        let again = try Outbox(home: home, desktop: device)
        #expect(again.session == session)
        #expect(again.acked == 1)
        #expect(again.pending.map(\.text) == ["two", "three", "four", "five"])
        #expect(again.nextSeq == 6)
    }
}
