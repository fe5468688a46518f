import SpeakBridgeCrypto
@testable import SpeakBridgeDesktopCore
@testable import SpeakBridgeProtocol
import Testing

@Suite("Desktop core: sessions and delivery")
struct SessionTests {
    func level(_ phone: Phone, _ session: String, _ seq: UInt64) -> SessionLevel {
        SessionLevel(device: phone.id, session: session, seq: seq)
    }

    @Test("resume answers the restored ack level; an unknown session is 0; resume alone creates no state")
    func resume() throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client])
        _ = desk.core.restore(live: [level(phone, "s", 7)], retired: [level(phone, "old", 3)])
        var session = try phone.open(&desk)
        #expect(desk.authenticated == [session.id])
        #expect(desk.touched == [phone.key.publicKey])
        session.send(.resume(session: "old", delivered: nil), to: &desk)
        session.send(.resume(session: "new", delivered: nil), to: &desk)
        #expect(session.received(from: &desk) == [.resume(session: "s", delivered: 7), .resume(session: "old", delivered: 3),
                                                  .resume(session: "new", delivered: 0)])
        #expect(desk.core.status.sessions.map(\.session) == ["s"])
    }

    @Test("chunks are submitted once; acks come only when durable, on every connection of the device")
    func deliverAndAck() throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client])
        var a = try phone.open(&desk)
        var b = try phone.open(&desk)
        _ = a.received(from: &desk)
        _ = b.received(from: &desk)
        a.send(.chunks(session: "s", [Chunk(seq: 1, text: "one"), Chunk(seq: 2, text: "two")]), to: &desk)
        #expect(desk.submitted.count == 1 && desk.submitted[0].chunks.map(\.seq) == [1, 2])
        #expect(a.received(from: &desk).isEmpty, "no ack before the chunks are durable")
        desk.run(.durable([level(phone, "s", 2)]))
        #expect(a.received(from: &desk) == [.ack(session: "s", seq: 2)])
        #expect(b.received(from: &desk) == [.ack(session: "s", seq: 2)])
        #expect(desk.core.stats.chunksDelivered == 2)
        // A durable level that does not move anything sends nothing.
        desk.run(.durable([level(phone, "s", 2)]))
        #expect(a.received(from: &desk).isEmpty)
    }

    /// The ledger `deliver` used last is found again without a lookup (`DesktopCore.lastLedger`) only while the
    /// ledgers keep their places: devices taking turns, one revoked between its chunks (its ledger removed), a
    /// third device's first chunk (a ledger added): every chunk is submitted once, in order, to its own device.
    @Test("devices taking turns, one revoked and one new between their chunks: each chunk submitted once, to its device")
    func ledgersTakingTurns() throws {
        let phones = [Phone.paired(), Phone.paired(), Phone.paired()]
        var desk = Desk(clients: phones.map(\.client))
        var a = try phones[0].open(&desk)
        var b = try phones[1].open(&desk)
        for seq in UInt64(1)...4 {
            a.send(.chunk(session: "s", Chunk(seq: seq, text: "a\(seq)")), to: &desk)
            b.send(.chunk(session: "s", Chunk(seq: seq, text: "b\(seq)")), to: &desk)
            b.send(.chunk(session: "s", Chunk(seq: seq, text: "b\(seq) again")), to: &desk)  // a resend: dropped
        }
        desk.run(.revoked(phones[0].id))
        var c = try phones[2].open(&desk)
        for seq in UInt64(5)...6 {
            b.send(.chunk(session: "s", Chunk(seq: seq, text: "b\(seq)")), to: &desk)
            c.send(.chunk(session: "t", Chunk(seq: seq, text: "c\(seq)")), to: &desk)
        }
        func texts(_ phone: Phone) -> [String] {
            desk.submitted.filter { $0.device == phone.id }.flatMap { $0.chunks.map(\.text) }
        }
        #expect(texts(phones[0]) == ["a1", "a2", "a3", "a4"])
        #expect(texts(phones[1]) == ["b1", "b2", "b3", "b4", "b5", "b6"])
        #expect(texts(phones[2]) == ["c5", "c6"])
        #expect(desk.core.stats.duplicatesDropped == 4)
    }

    @Test("a resend is dropped, not delivered twice; when all of it is durable it is acked at once")
    func duplicates() throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client])
        var s = try phone.open(&desk)
        _ = s.received(from: &desk)
        s.send(.chunks(session: "s", [Chunk(seq: 1, text: "a"), Chunk(seq: 2, text: "b"), Chunk(seq: 3, text: "c")]), to: &desk)
        desk.run(.durable([level(phone, "s", 3)]))
        _ = s.received(from: &desk)
        s.send(.chunks(session: "s", [Chunk(seq: 2, text: "b"), Chunk(seq: 3, text: "c")]), to: &desk)
        #expect(desk.submitted.count == 1)
        #expect(s.received(from: &desk) == [.ack(session: "s", seq: 3)])
        #expect(desk.core.stats.duplicatesDropped == 2)
        // Half new, half old: only the new part goes on.
        s.send(.chunks(session: "s", [Chunk(seq: 3, text: "c"), Chunk(seq: 4, text: "d")]), to: &desk)
        #expect(desk.submitted.last?.chunks.map(\.seq) == [4])
    }

    @Test("the 65th session with every other in flight is refused with too-many-sessions and closed; nothing of it accepted")
    func tooManySessions() throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client])
        var s = try phone.open(&desk)
        _ = s.received(from: &desk)
        for i in 0..<SessionLedger.defaultMaxLive {
            s.send(.chunk(session: "s\(i)", Chunk(seq: 1, text: "x")), to: &desk)
        }
        #expect(s.received(from: &desk).isEmpty)
        s.send(.chunk(session: "extra", Chunk(seq: 1, text: "x")), to: &desk)
        guard case .error(let code, _, _)? = s.received(from: &desk).first else { Issue.record("no refusal"); return }
        #expect(code == .tooManySessions)
        #expect(desk.submitted.count == SessionLedger.defaultMaxLive)
        // Closed after the error (1013): a later chunk of "extra" on it would be a forward jump whose ack covers
        // the refused one.
        #expect(desk.closes[s.id] == .failed(.chunkRefused(phone.id, .tooManySessions)))
        #expect(desk.closes[s.id]?.closeCode.code == 1013)
        // Once one session is durable it can be retired, and the new session is taken (on a new connection).
        desk.run(.durable([level(phone, "s0", 1)]))
        var t = try phone.open(&desk)
        _ = t.received(from: &desk)
        t.send(.chunk(session: "extra", Chunk(seq: 1, text: "x")), to: &desk)
        #expect(desk.retired.map(\.1.session) == ["s0"])
        #expect(desk.submitted.last?.session == "extra")
    }

    /// A refused chunk followed, on the same connection, by the next chunk of its session: accepting that one
    /// (a forward jump) and acking it would tell a client that drops what is acked that the refused chunk is in
    /// every sink. The connection ends with the refusal, so nothing after it is taken on that connection.
    @Test("a refused chunk (too large, malformed, too many sessions) closes its connection: no later ack covers it")
    func aRefusedChunkIsNeverCoveredByALaterAck() throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client])
        var s = try phone.open(&desk)
        _ = s.received(from: &desk)
        let big = String(repeating: "x", count: 16_385)
        try s.sendRaw(#"{"type":"chunk","session":"s","seq":1,"text":"\#(big)"}"#, to: &desk)
        guard case .error(.tooLarge, _, _)? = s.received(from: &desk).first else { Issue.record("no too-large"); return }
        #expect(desk.closes[s.id] == .failed(.chunkRefused(phone.id, .tooLarge)))
        #expect(desk.closes[s.id]?.closeCode.code == 1008)
        s.send(.chunk(session: "s", Chunk(seq: 2, text: "second")), to: &desk)
        #expect(desk.submitted.isEmpty, "a chunk after the refused one was taken on the same connection")
        #expect(!s.received(from: &desk).contains { if case .ack = $0 { true } else { false } })

        var t = try phone.open(&desk)
        _ = t.received(from: &desk)
        try t.sendRaw(#"{"type":"chunks","session":"s","chunks":[{"seq":1,"text":"a"},{"seq":3,"text":"gap"}]}"#, to: &desk)
        guard case .error(.malformed, _, _)? = t.received(from: &desk).first else { Issue.record("no malformed"); return }
        #expect(desk.closes[t.id] == .failed(.chunkRefused(phone.id, .malformed)))
        // A message that is no chunk is still only answered.
        var u = try phone.open(&desk)
        _ = u.received(from: &desk)
        try u.sendRaw(#"{"type":"teleport"}"#, to: &desk)
        guard case .error(.unknownType, _, _)? = u.received(from: &desk).first else { Issue.record("no unknown-type"); return }
        #expect(desk.closes[u.id] == nil)
        u.send(.chunk(session: "s", Chunk(seq: 1, text: "resent")), to: &desk)
        #expect(desk.submitted.map(\.chunks.first?.text) == ["resent"])
    }

    @Test("backlog: over the high-water mark reading pauses, drained it resumes, at the hard limit 1013")
    func backpressure() throws {
        let phone = Phone.paired()
        let limits = BacklogMeter.Limits(highChunks: 2, highBytes: 1 << 20, lowChunks: 1, lowBytes: 1 << 20,
                                         hardChunks: 4, hardBytes: 1 << 20)
        var desk = Desk(clients: [phone.client], limits: limits)
        var s = try phone.open(&desk)
        s.send(.chunks(session: "s", (1...3).map { Chunk(seq: $0, text: "x") }), to: &desk)
        #expect(desk.pausedReading == [s.id])
        #expect(desk.logs.contains { $0.message.contains("3 chunks (3 bytes) not yet in every sink; reading paused") })
        desk.sinkTook(phone.id, chunks: 2, bytes: 2)
        #expect(desk.resumedReading == [s.id])
        // Frames read before the pause took effect pile up to the hard limit: the next message is refused.
        s.send(.chunks(session: "s", (4...6).map { Chunk(seq: $0, text: "x") }), to: &desk)
        s.send(.chunk(session: "s", Chunk(seq: 7, text: "x")), to: &desk)
        let reason = try #require(desk.closes[s.id])
        #expect(reason == .failed(.overloaded(phone.id)) && reason.closeCode.code == 1013)
        #expect(desk.submitted.last?.chunks.last?.seq == 6, "the refused chunk is not accepted")
        // Its resend after a reconnect (once drained) is accepted: nothing was lost.
        desk.sinkTook(phone.id, chunks: 4, bytes: 4)
        var again = try phone.open(&desk, first: .chunk(session: "s", Chunk(seq: 7, text: "x")))
        #expect(desk.submitted.last?.chunks.map(\.seq) == [7])
        _ = again.received(from: &desk)
    }

    @Test("a device paused again and again is logged once per 10 s, with the pauses in between counted")
    func pauseLogIsRateLimited() throws {
        let phone = Phone.paired()
        let limits = BacklogMeter.Limits(highChunks: 2, highBytes: 1 << 20, lowChunks: 1, lowBytes: 1 << 20,
                                         hardChunks: 1_000, hardBytes: 1 << 20)
        var desk = Desk(clients: [phone.client], limits: limits)
        var s = try phone.open(&desk)
        func pausedLogs() -> [String] { desk.logs.map(\.message).filter { $0.contains("reading paused") } }
        var seq: UInt64 = 0
        func pauseOnce() {
            s.send(.chunks(session: "s", (1...3).map { _ in seq += 1; return Chunk(seq: seq, text: "x") }), to: &desk)
            desk.sinkTook(phone.id, chunks: 3, bytes: 3)
        }
        for _ in 0..<5 {
            pauseOnce()
            desk.now += 1
        }
        // Five pauses (each one read again after it drained), one line about them so far.
        #expect(desk.pausedReading.count == 5 && desk.resumedReading.count == 5)
        #expect(pausedLogs().count == 1)
        desk.now += 10
        pauseOnce()
        #expect(pausedLogs().count == 2)
        #expect(pausedLogs().last?.hasSuffix("reading paused (4 more pauses since the last report)") == true)
    }

    @Test("revoke closes the device's connections (1008) and forgets its delivery state; it cannot come back")
    func revoke() throws {
        let phone = Phone.paired()
        let other = Phone.paired()
        var desk = Desk(clients: [phone.client, other.client])
        var s = try phone.open(&desk)
        let o = try other.open(&desk)
        s.send(.chunk(session: "s", Chunk(seq: 1, text: "x")), to: &desk)
        desk.run(.revoked(phone.id))
        #expect(desk.closes[s.id] == .rejected(.revoked(phone.id)))
        #expect(desk.closes[s.id]?.closeCode.code == 1008 && desk.closes[s.id]?.closeCode.text == "revoked")
        #expect(desk.closes[o.id] == nil)
        #expect(desk.forgotten == [phone.id])
        #expect(!desk.core.status.sessions.contains { $0.device == phone.id })
        #expect(desk.core.status.authenticated == 1)
        // A durable level arriving late moves nothing and acks nothing.
        desk.run(.durable([level(phone, "s", 1)]))
        #expect(desk.core.stats.chunksDelivered == 0)
        let c = desk.newConnection()
        desk.run(.connected(c, path: SpeakBridgeProtocol.sessionPath, remote: "127.0.0.1"))
        var m = try InitiatorMachine(intent: .session, localStatic: phone.key, desktopKey: Desk.publicKey,
                                     psk: try #require(phone.psk), firstMessage: .hello(agent: "t"))
        desk.run(.frame(c, try m.start()))
        #expect(desk.closes[c] == .rejected(.unknownDevice))
    }

    @Test("revoked between message 1 and the first transport message: refused with 1008 revoked, never authenticated")
    func revokedDuringHandshake() throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client])
        let c = desk.newConnection()
        desk.run(.connected(c, path: SpeakBridgeProtocol.sessionPath, remote: "127.0.0.1"))
        var m = try InitiatorMachine(intent: .session, localStatic: phone.key, desktopKey: Desk.publicKey,
                                     psk: try #require(phone.psk), firstMessage: .hello(agent: "t"))
        desk.run(.frame(c, try m.start()))
        for frame in desk.take(c) { _ = m.receive(frame) }
        desk.run(.revoked(phone.id))
        for frame in Phone.sends(m.encryptAndSend(.resume(session: "s", delivered: nil))) { desk.run(.frame(c, frame)) }
        #expect(desk.closes[c] == .rejected(.revokedDuringHandshake(phone.id)))
        // Like a revocation while connected (its transport message proved the handshake); 1000 before 2026-12-07.
        #expect(desk.closes[c]?.closeCode.code == 1008 && desk.closes[c]?.closeCode.text == "revoked")
        #expect(desk.authenticated.isEmpty)
    }

    @Test("a replayed message 1 gets message 2 and nothing else; what follows closes it as a replay")
    func replay() throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client])
        var m = try InitiatorMachine(intent: .session, localStatic: phone.key, desktopKey: Desk.publicKey,
                                     psk: try #require(phone.psk), firstMessage: .hello(agent: "t"))
        let message1 = try m.start()
        let c = desk.newConnection()
        desk.run(.connected(c, path: SpeakBridgeProtocol.sessionPath, remote: "127.0.0.1"))
        desk.run(.frame(c, message1))
        #expect(desk.take(c).count == 1)
        desk.run(.frame(c, Array(repeating: 0x41, count: 48)))
        #expect(desk.closes[c] == .rejected(.replayedHandshake))
        #expect(desk.authenticated.isEmpty && desk.touched.isEmpty)
        #expect(desk.core.stats.rejected == 1)
    }
}

/// Acks go to exactly the acked device's established connections, in connection order, also in a batch that
/// covers several devices, and stop when a connection is gone.
@Suite("Desktop core: ack targets")
struct AckTargetTests {
    @Test("a batch over several devices acks each device's connections only, each in level order")
    func severalDevices() throws {
        let phones = (0..<3).map { _ in Phone.paired() }
        var desk = Desk(clients: phones.map(\.client))
        // Interleaved connections: 1 and 4 are phone 0's, 2 and 5 phone 1's, 3 phone 2's.
        var sessions: [(Int, Session)] = []
        for round in 0..<2 {
            for (n, phone) in phones.enumerated() where !(round == 1 && n == 2) {
                var s = try phone.open(&desk, first: .chunks(session: "s\(n)", [Chunk(seq: 1, text: "a"), Chunk(seq: 2, text: "b")]))
                _ = s.received(from: &desk)
                sessions.append((n, s))
            }
        }
        _ = try phones[0].open(&desk, first: .chunks(session: "t", [Chunk(seq: 1, text: "c")]))
        let levels = [SessionLevel(device: phones[0].id, session: "s0", seq: 1),
                      SessionLevel(device: phones[1].id, session: "s1", seq: 2),
                      SessionLevel(device: phones[0].id, session: "t", seq: 1),
                      SessionLevel(device: phones[0].id, session: "s0", seq: 2)]
        let actions = desk.core.handle(.durable(levels), now: desk.now)
        let targets = actions.compactMap { if case let .send(id, _) = $0 { return id } else { return nil } }
        #expect(targets == targets.sorted(), "in connection order")
        desk.perform(actions)
        for (n, var s) in sessions {
            let expected: [Message] = switch n {
            case 0: [.ack(session: "s0", seq: 1), .ack(session: "t", seq: 1), .ack(session: "s0", seq: 2)]
            case 1: [.ack(session: "s1", seq: 2)]
            default: []
            }
            #expect(s.received(from: &desk) == expected, "phone \(n), connection \(s.id)")
        }
        #expect(desk.core.stats.chunksDelivered == 5)
    }

    @Test("one session's level acks every established connection of its device; closed ones are skipped")
    func oneLevel() throws {
        let phone = Phone.paired(), other = Phone.paired()
        var desk = Desk(clients: [phone.client, other.client])
        var a = try phone.open(&desk, first: .chunk(session: "s", Chunk(seq: 1, text: "x")))
        var o = try other.open(&desk)
        var b = try phone.open(&desk)
        var c = try phone.open(&desk)
        _ = (a.received(from: &desk), o.received(from: &desk), b.received(from: &desk), c.received(from: &desk))
        desk.run(.closed(b.id))
        desk.run(.durable([SessionLevel(device: phone.id, session: "s", seq: 1)]))
        #expect(a.received(from: &desk) == [.ack(session: "s", seq: 1)])
        #expect(c.received(from: &desk) == [.ack(session: "s", seq: 1)])
        #expect(b.received(from: &desk).isEmpty)
        #expect(o.received(from: &desk).isEmpty)
        // Revoked: its connections are closed and get no ack any more.
        desk.run(.revoked(phone.id))
        desk.run(.durable([SessionLevel(device: phone.id, session: "s", seq: 1)]))
        #expect(desk.take(a.id).isEmpty && desk.take(c.id).isEmpty)
        #expect(desk.core.authenticated[phone.id] == nil)
    }
}
