@testable import SpeakBridgeDesktopCore
@testable import SpeakBridgeProtocol
import Testing

/// A paired device that sends config messages faster than the config module answers them: each waiting one holds
/// its decoded body and a pass over the store on the queue every device shares. Before the bound, 10,000 pulls
/// became 10,000 queued requests.
@Suite("config messages: bounded per connection")
struct ConfigBacklogTests {
    static func pull(_ n: Int) -> Message { .config(type: "config-pull", body: .object([("batch", .string("b\(n)"))])) }

    static func requests(_ desk: Desk) -> Int {
        desk.configAsks.filter { if case .configRequest = $0 { return true } else { return false } }.count
    }

    @Test("unanswered, reading pauses at the mark and a flood is closed with 1013 at the limit")
    func flood() throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client], takesConfig: true)
        var s = try phone.open(&desk)  // its `.configOpened` waits for an answer too
        for n in 1..<DesktopCore.configAskedPause - 1 { s.send(Self.pull(n), to: &desk) }
        #expect(desk.pausedReading.isEmpty)
        s.send(Self.pull(0), to: &desk)
        #expect(desk.pausedReading == [s.id], "paused at \(DesktopCore.configAskedPause) unanswered")
        // Frames read before the pause took effect still come in, up to the limit; the next one closes.
        for n in 0..<10_000 where desk.closes[s.id] == nil { s.send(Self.pull(n), to: &desk) }
        let reason = try #require(desk.closes[s.id])
        #expect(reason == .failed(.configBacklog(phone.id)) && reason.closeCode.code == 1013)
        #expect(desk.configAsks.count == DesktopCore.configAskedLimit, "the opened one and the requests")
        #expect(desk.pausedReading == [s.id])
    }

    @Test("answered, the connection is read again; a backlog pause holds it until the device drained")
    func answered() throws {
        let phone = Phone.paired()
        let limits = BacklogMeter.Limits(highChunks: 2, highBytes: 1 << 20, lowChunks: 1, lowBytes: 1 << 20,
                                         hardChunks: 100, hardBytes: 1 << 20)
        var desk = Desk(clients: [phone.client], takesConfig: true, limits: limits)
        var s = try phone.open(&desk)
        for n in 1..<DesktopCore.configAskedPause { s.send(Self.pull(n), to: &desk) }
        #expect(desk.pausedReading == [s.id])
        desk.run(.configReplies(s.id, []))
        #expect(desk.resumedReading == [s.id], "3 unanswered: below the mark")
        desk.run(.configReplies(s.id, []))
        #expect(desk.resumedReading == [s.id], "a resume per pause, not per answer")

        // Paused for both reasons: neither the drain nor the answers alone read it again.
        s.send(Self.pull(8), to: &desk)
        s.send(Self.pull(9), to: &desk)
        #expect(desk.pausedReading == [s.id, s.id])
        s.send(.chunks(session: "s", (1...3).map { Chunk(seq: $0, text: "x") }), to: &desk)
        #expect(desk.pausedReading.count == 3, "the backlog paused it as well")
        desk.sinkTook(phone.id, chunks: 3, bytes: 3)
        #expect(desk.resumedReading == [s.id], "still 4 config messages unanswered")
        s.send(.chunks(session: "s", (4...6).map { Chunk(seq: $0, text: "x") }), to: &desk)
        #expect(desk.pausedReading.count == 4, "the backlog paused it again")
        desk.run(.configReplies(s.id, []))
        #expect(desk.resumedReading == [s.id], "the backlog still holds it")
        desk.sinkTook(phone.id, chunks: 3, bytes: 3)
        #expect(desk.resumedReading == [s.id, s.id])
        #expect(desk.closes[s.id] == nil)
        #expect(Self.requests(desk) == DesktopCore.configAskedPause + 1)

        // A late answer for a closed connection changes nothing.
        desk.run(.closed(s.id))
        desk.run(.configReplies(s.id, []))
        #expect(desk.resumedReading.count == 2)
    }
}
