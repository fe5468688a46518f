import Testing
@testable import SpeakBridgeProtocol

/// `advanceDelivered` (the desktop's per-ack path: one lookup) moves the ledger exactly as `markDelivered` does
/// and reports the level before.
@Suite("Session ledger: advanceDelivered")
struct LedgerAdvanceTests {
    @Test func answersAsMarkDeliveredOverRandomOperations() {
        var rng = SystemRandomNumberGenerator()
        var fast = SessionLedger(), reference = SessionLedger()
        let sessions = ["a", "b", "c", "d"]
        var next: [String: UInt64] = [:]
        for _ in 0..<3_000 {
            let session = sessions.randomElement(using: &rng)!
            if Bool.random(using: &rng) {
                let from = next[session, default: 1]
                let chunks = (from..<from + UInt64.random(in: 1...4, using: &rng)).map { Chunk(seq: $0, text: "x") }
                next[session] = from + UInt64(chunks.count)
                _ = fast.offer(session: session, chunks: chunks)
                _ = reference.offer(session: session, chunks: chunks)
            } else {
                let seq = UInt64.random(in: 0...next[session, default: 1] + 1, using: &rng)
                let before = reference.delivered(session)
                let moved = reference.markDelivered(session: session, through: seq)
                let answer = fast.advanceDelivered(session: session, through: seq)
                #expect(answer == (moved ? before : nil))
            }
            #expect(fast.allSessions == reference.allSessions)
        }
    }
}
