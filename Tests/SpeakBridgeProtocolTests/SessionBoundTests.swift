import SpeakBridgeTestSupport
import Testing
@testable import SpeakBridgeProtocol

/// The session bound and the retirement rule (PROTOCOL.md, "Session bound").
@Suite("Session bound and retirement")
struct SessionBoundTests {
    func chunks(_ range: ClosedRange<UInt64>) -> [Chunk] { range.map { Chunk(seq: $0, text: "line \($0)") } }

    /// Offers `range` and marks it delivered (as the daemon does once it is in every sink and durable).
    func deliver(_ ledger: inout SessionLedger, _ session: String, _ range: ClosedRange<UInt64>) -> SessionLedger.Offer {
        let offer = ledger.offer(session: session, chunks: chunks(range))
        if let last = offer.accepted.last { ledger.markDelivered(session: session, through: last.seq) }
        return offer
    }

    @Test func liveSessionsStayWithinTheBoundAndTheLeastRecentlyUsedIsRetired() {
        var ledger = SessionLedger(maxLive: 4, maxRetired: 100)
        for i in 0..<4 { _ = deliver(&ledger, "s\(i)", 1...3) }
        _ = deliver(&ledger, "s0", 4...4)  // s0 is used again: s1 is now the least recently used
        let offer = deliver(&ledger, "s4", 1...1)
        #expect(offer.retired == [.init(session: "s1", delivered: 3)])
        #expect(ledger.liveCount == 4)
        #expect(ledger.entry("s1") == nil)
        #expect(ledger.retiredSessions == ["s1": 3])
        #expect(ledger.delivered("s1") == 3)  // `resume` still answers the right level
    }

    @Test func aRetiredSessionThatComesBackNeverGetsAChunkTwice() {
        var ledger = SessionLedger(maxLive: 2, maxRetired: 100)
        _ = deliver(&ledger, "old", 1...5)
        _ = deliver(&ledger, "a", 1...1)
        _ = deliver(&ledger, "b", 1...1)  // retires "old" at 5
        #expect(ledger.entry("old") == nil)
        // The client missed the acks: it resends 3...7 (3...5 were delivered before the retirement).
        let back = ledger.offer(session: "old", chunks: chunks(3...7))
        #expect(back.accepted.map(\.seq) == [6, 7])
        #expect(back.duplicates == 3)
        #expect(back.retired.map(\.session) == ["a"])
        #expect(ledger.entry("old") == .init(accepted: 7, delivered: 5))
        #expect(ledger.retiredSessions["old"] == nil)
    }

    @Test func onlyQuiescentSessionsAreRetiredElseTheNewSessionIsRefusedAsBusy() {
        var ledger = SessionLedger(maxLive: 2, maxRetired: 100)
        _ = ledger.offer(session: "a", chunks: chunks(1...2))  // in flight, not delivered
        _ = ledger.offer(session: "b", chunks: chunks(1...2))
        let refused = ledger.offer(session: "c", chunks: chunks(1...1))
        #expect(refused.refusal == .busy)
        #expect(refused.accepted.isEmpty)
        #expect(ledger.entry("c") == nil)
        ledger.markDelivered(session: "b", through: 2)
        let admitted = ledger.offer(session: "c", chunks: chunks(1...1))
        #expect(admitted.refusal == nil)
        #expect(admitted.retired.map(\.session) == ["b"])
        #expect(ledger.entry("a") == .init(accepted: 2, delivered: 0))  // never retired with chunks in flight
    }

    @Test func aFullRetiredTableRefusesNewSessionsButKeepsEveryKnownOneWorking() {
        var ledger = SessionLedger(maxLive: 2, maxRetired: 3)
        for i in 0..<5 { #expect(deliver(&ledger, "s\(i)", 1...2).refusal == nil) }
        #expect(ledger.retiredSessions.count == 3)
        let refused = ledger.offer(session: "new", chunks: chunks(1...1))
        #expect(refused.refusal == .exhausted)
        #expect(refused.accepted.isEmpty)
        #expect(ledger.delivered("new") == 0)
        // A retired session still comes back (swapping places with a live one), without duplicates.
        let back = ledger.offer(session: "s0", chunks: chunks(1...3))
        #expect(back.refusal == nil)
        #expect(back.accepted.map(\.seq) == [3])
        #expect(ledger.retiredSessions.count == 3)
        #expect(ledger.liveCount == 2)
    }

    @Test func resumeOfAnUnknownSessionCreatesNoState() {
        let ledger = SessionLedger(maxLive: 2, maxRetired: 2)
        for i in 0..<1_000 { #expect(ledger.delivered("probe\(i)") == 0) }
        #expect(ledger.liveCount == 0)
    }

    @Test func restoringMoreThanTheBoundRetiresTheExtraAtOnce() {
        var ledger = SessionLedger(maxLive: 3, maxRetired: 2)
        for i in 0..<6 { ledger.restore(session: "s\(i)", delivered: UInt64(i + 1)) }
        ledger.restoreRetired(session: "r", delivered: 9)
        let retired = ledger.trim()
        #expect(retired.count == 3)
        #expect(ledger.liveCount == 3)
        // Nothing is forgotten even beyond the retired bound (state of an older desktop) ...
        #expect(ledger.retiredSessions.count == 4)
        for i in 0..<6 { #expect(ledger.delivered("s\(i)") == UInt64(i + 1)) }
        // ... but no new session is taken until it is back under the bound.
        #expect(deliver(&ledger, "new", 1...1).refusal == .exhausted)
    }

    /// A client that juggles many sessions, loses acks and resends: across any retirement, every chunk is accepted
    /// at most once, and the live and retired tables never exceed their bounds.
    /// `sticky`: most offers are for the previous offer's session (as a connection's chunks are), so the ledger's
    /// remembered entry is used across admissions and retirements of other sessions too.
    @Test(arguments: [false, true])
    func randomisedJugglingKeepsExactlyOnceAndTheBounds(sticky: Bool) {
        var rng = SplitMix64(seed: sticky ? 9 : 8)
        var ledger = SessionLedger(maxLive: 8, maxRetired: 40)
        var sent: [String: UInt64] = [:]  // client side: highest seq produced per session
        var accepted = Set<String>()
        var previous = "s0"
        for _ in 0..<20_000 {
            let session = sticky && rng.next() % 10 < 7 ? previous : "s\(rng.next() % 60)"
            previous = session
            let top = sent[session] ?? 0
            // Resend a few of the last chunks (lost acks) plus one or two new ones.
            let from = top > 3 ? top - rng.next() % 3 : 1
            let to = top + 1 + rng.next() % 2
            let offer = ledger.offer(session: session, chunks: chunks(from...to))
            #expect(ledger.liveCount <= 8)
            #expect(ledger.retiredSessions.count <= 40)
            if offer.refusal != nil { continue }
            sent[session] = to
            for chunk in offer.accepted {
                let inserted = accepted.insert("\(session)#\(chunk.seq)").inserted
                #expect(inserted, "chunk \(chunk.seq) of \(session) accepted twice")
            }
            if rng.next() % 3 != 0, let last = offer.accepted.last {
                ledger.markDelivered(session: session, through: last.seq)
            } else if let entry = ledger.entry(session) {
                ledger.markDelivered(session: session, through: entry.accepted)
            }
        }
    }
}
