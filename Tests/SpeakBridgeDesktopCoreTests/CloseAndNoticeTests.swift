import SpeakBridgeCrypto
import SpeakBridgeSupport
@testable import SpeakBridgeDesktopCore
@testable import SpeakBridgeProtocol
import Testing
import SpeakBridgeSupport

@Suite("Desktop core: closes, counters, errors, held, config")
struct CloseAndNoticeTests {
    @Test("five sends that end with bye are five normal closes, no rejection; an unknown device is one rejection")
    func byeIsNotARejection() throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client])
        for i in 1...5 {
            var s = try phone.open(&desk, first: .chunk(session: "s", Chunk(seq: UInt64(i), text: "line \(i)")))
            desk.run(.durable([SessionLevel(device: phone.id, session: "s", seq: UInt64(i))]))
            s.send(.bye, to: &desk)
            #expect(desk.closes[s.id] == .bye(phone.id))
            #expect(desk.closes[s.id]?.closeCode.code == 1000)
        }
        #expect(desk.core.stats.closedNormally == 5)
        #expect(desk.core.stats.rejected == 0 && desk.core.stats.closedOnError == 0 && desk.core.stats.pairingFailures == 0)
        #expect(desk.core.status.connections == 0)
        // A stranger: refused at message 1, counted once as rejected.
        var stranger = Phone.paired()
        stranger.psk = SymmetricKey.random()
        let c = desk.newConnection()
        desk.run(.connected(c, path: SpeakBridgeProtocol.sessionPath, remote: "127.0.0.1"))
        var m = try InitiatorMachine(intent: .session, localStatic: stranger.key, desktopKey: Desk.publicKey,
                                     psk: stranger.psk!, firstMessage: .hello(agent: "t"))
        desk.run(.frame(c, try m.start()))
        desk.run(.closed(c))  // the transport reports the close it carried out: not counted again
        #expect(desk.core.stats.rejected == 1 && desk.core.stats.closedNormally == 5)
    }

    @Test("an unknown path is refused with 1008 and counted as a rejection")
    func unknownPath() {
        var desk = Desk()
        let c = desk.newConnection()
        desk.run(.connected(c, path: "/other", remote: "127.0.0.1"))
        #expect(desk.closes[c] == .rejected(.unknownPath))
        #expect(desk.closes[c]?.closeCode.code == 1008)
        #expect(desk.core.stats.rejected == 1)
    }

    /// Authenticated connections leave the admission counts: a paired device (or a stolen key) could open hundreds,
    /// each with its own send queue, every ack going to each. The ninth closes the oldest (1008), the rest stay
    /// open and still get the device's acks. Before, nothing bounded them.
    @Test("a device's ninth session connection closes its oldest with 1008; the other eight stay")
    func aDevicesConnectionsAreBounded() throws {
        let phone = Phone.paired()
        let other = Phone.paired()
        var desk = Desk(clients: [phone.client, other.client])
        let others = try other.open(&desk)  // the oldest connection of all, of another device
        var sessions: [Session] = []
        for _ in 1...DesktopCore.maxConnectionsPerDevice {
            sessions.append(try phone.open(&desk))
        }
        #expect(desk.closes.isEmpty)
        var ninth = try phone.open(&desk)
        #expect(desk.closes == [sessions[0].id: .rejected(.tooManyConnections(phone.id))])
        #expect(desk.closes[sessions[0].id]?.closeCode.code == 1008)
        #expect(desk.closes[sessions[0].id]?.closeCode.text == "too many connections of this device")
        #expect(desk.closes[others.id] == nil)
        #expect(desk.core.status.connections == DesktopCore.maxConnectionsPerDevice + 1)
        #expect(desk.core.stats.rejected == 1)
        // The ninth works: a chunk on it is submitted.
        ninth.send(.chunk(session: "s", Chunk(seq: 1, text: "still here")), to: &desk)
        #expect(desk.submitted.map(\.chunks.count) == [1])
    }

    /// A stranger decides how many refusals there are, and each log line is written on the network thread: 200
    /// pairing connections while no code is live, and 200 sessions with unknown keys, log at most 5 lines of each
    /// kind in 10 s; the next line after the window says how many were not shown. `status` counts them all.
    @Test("refusals a stranger repeats are logged at most 5 times in 10 s, then one line counts the rest")
    func strangersRefusalsAreThrottledInTheLog() throws {
        var desk = Desk()
        for _ in 0..<200 {
            let c = desk.newConnection()
            desk.run(.connected(c, path: SpeakBridgeProtocol.pairPath, remote: "192.0.2.9"))
        }
        let stranger = Phone.paired()
        for _ in 0..<200 {
            let c = desk.newConnection()
            desk.run(.connected(c, path: SpeakBridgeProtocol.sessionPath, remote: "192.0.2.9"))
            var m = try InitiatorMachine(intent: .session, localStatic: stranger.key, desktopKey: Desk.publicKey,
                                         psk: stranger.psk!, firstMessage: .hello(agent: "t"))
            desk.run(.frame(c, try m.start()))
        }
        let refusedPairing = desk.logs.filter { $0.message.hasPrefix("pairing attempt from") }
        let closed = desk.logs.filter { $0.message.hasPrefix("connection closed:") }
        #expect(refusedPairing.count == 5, "\(refusedPairing.count)")
        #expect(closed.count == 5, "\(closed.count)")
        #expect(desk.core.stats.rejected == 400)
        desk.now += 11
        let c = desk.newConnection()
        desk.run(.connected(c, path: SpeakBridgeProtocol.pairPath, remote: "192.0.2.9"))
        #expect(desk.logs.last?.message.hasSuffix("(and 195 more like it in the 10 s before, not shown)") == true,
                "\(desk.logs.last?.message ?? "")")
    }

    /// A flood that stops is counted when its window ends, not at the next refusal (which may never come): the core
    /// asks for a tick at the window's end (`nextDeadline`), and that tick logs one line per kind with the count.
    @Test("a flood that stops is counted at the end of its window, by the tick the core asks for")
    func aFloodThatStopsIsCountedAtTheEndOfItsWindow() throws {
        var desk = Desk()
        let start = desk.now
        #expect(desk.core.nextDeadline == nil)
        for _ in 0..<20 {
            let c = desk.newConnection()
            desk.run(.connected(c, path: SpeakBridgeProtocol.pairPath, remote: "192.0.2.9"))
        }
        let stranger = Phone.paired()
        desk.now += 1
        for _ in 0..<9 {
            let c = desk.newConnection()
            desk.run(.connected(c, path: SpeakBridgeProtocol.sessionPath, remote: "192.0.2.9"))
            var m = try InitiatorMachine(intent: .session, localStatic: stranger.key, desktopKey: Desk.publicKey,
                                         psk: stranger.psk!, firstMessage: .hello(agent: "t"))
            desk.run(.frame(c, try m.start()))
        }
        // The first window to end is the pairing attempts' (started first).
        #expect(desk.core.nextDeadline == start + LogThrottle.interval)
        let before = desk.logs.count
        desk.now = start + 5
        desk.run(.tick)
        #expect(desk.logs.count == before, "nothing is counted before the window ends")
        desk.now = start + LogThrottle.interval + 0.05
        desk.run(.tick)
        #expect(desk.logs.suffix(from: before).map(\.message) == ["15 more refused pairing attempts in the 10 s before, not shown"])
        #expect(desk.logs.last?.level == .warning)
        #expect(desk.core.nextDeadline == start + 1 + LogThrottle.interval)
        desk.now = start + 1 + LogThrottle.interval + 0.05
        desk.run(.tick)
        #expect(desk.logs.last?.message == "4 more refused connections in the 10 s before, not shown")
        #expect(desk.core.nextDeadline == nil, "nothing left to count: the daemon need not wake")
        // A later refusal starts afresh: shown, with no count of its own.
        let c = desk.newConnection()
        desk.run(.connected(c, path: SpeakBridgeProtocol.pairPath, remote: "192.0.2.9"))
        #expect(desk.logs.last?.message.hasPrefix("pairing attempt from 192.0.2.9") == true)
        #expect(desk.logs.last?.message.contains("more like it") == false)
        #expect(desk.core.stats.rejected == 30)
    }

    /// A paired device decides how many connections it opens and closes (a stolen key in a loop): the close lines
    /// of each device are held to 5 in 10 s, counted at the window's end; another device's, and a revocation, are
    /// still logged.
    @Test("a paired device's connection closes are logged at most 5 times in 10 s, per device; revocations always")
    func aDevicesClosesAreThrottledPerDevice() throws {
        let loud = Phone.paired()
        let quiet = Phone.paired()
        var desk = Desk(clients: [loud.client, quiet.client])
        let start = desk.now
        for _ in 0..<40 {
            var s = try loud.open(&desk)
            s.send(.bye, to: &desk)
        }
        var q = try quiet.open(&desk)
        q.send(.bye, to: &desk)
        let closes = desk.logs.filter { $0.message.hasPrefix("connection closed:") }
        #expect(closes.filter { $0.message.contains("\(loud.id)") }.count == 5, "\(closes.map(\.message))")
        #expect(closes.filter { $0.message.contains("\(quiet.id)") }.count == 1)
        #expect(desk.core.stats.closedNormally == 41)
        desk.now = start + LogThrottle.interval + 0.05
        desk.run(.tick)
        #expect(desk.logs.last?.message == "35 more closed connections of \(loud.id) in the 10 s before, not shown")
        #expect(desk.core.nextDeadline == nil)
        // A revocation is the user's act: logged whatever the device did before.
        for _ in 0..<6 {
            var s = try loud.open(&desk)
            s.send(.bye, to: &desk)
        }
        let s = try loud.open(&desk)
        desk.run(.revoked(loud.id))
        #expect(desk.closes[s.id] == .rejected(.revoked(loud.id)))
        #expect(desk.logs.contains { $0.message == "connection closed: \(loud.id) was revoked" }, "\(desk.logs.suffix(3))")
    }

    @Test("a client's error closes the session, well-formed or malformed; other malformed messages are answered")
    func clientErrors() throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client])
        var s = try phone.open(&desk)
        _ = s.received(from: &desk)
        try s.sendRaw(#"{"type":"resume"}"#, to: &desk)
        guard case .error(.malformed, _, _)? = s.received(from: &desk).first else { Issue.record("no malformed reply"); return }
        #expect(desk.closes[s.id] == nil, "a malformed message that is no chunk is only answered")
        for raw in [#"{"type":"error"}"#, #"{"type":"error","code":7}"#, #"{"type":"error","code":"x","message":[]}"#] {
            var t = try phone.open(&desk)
            _ = t.received(from: &desk)
            try t.sendRaw(raw, to: &desk)
            guard case .failed(.peerError(phone.id, .malformed, _))? = desk.closes[t.id] else {
                Issue.record("\(raw): \(String(describing: desk.closes[t.id]))"); return
            }
            #expect(t.received(from: &desk).isEmpty, "\(raw) was answered instead of closing")
        }
        var u = try phone.open(&desk)
        u.send(.error(code: .other("from-the-future"), message: "bye for now", expected: nil), to: &desk)
        #expect(desk.closes[u.id] == .failed(.peerError(phone.id, .other("from-the-future"), "bye for now")))
        #expect(desk.logs.contains { $0.message.contains("reported error from-the-future: bye for now") })
        #expect(desk.core.stats.closedOnError == 4 && desk.core.stats.rejected == 0)
    }

    @Test("held: each established connection of the device is told once per change, sanitized; others are not")
    func held() throws {
        let phone = Phone.paired()
        let other = Phone.paired()
        var desk = Desk(clients: [phone.client, other.client])
        var a = try phone.open(&desk)
        var b = try phone.open(&desk)
        var o = try other.open(&desk)
        _ = a.received(from: &desk); _ = b.received(from: &desk); _ = o.received(from: &desk)
        let reason = "xclip: Can't open display :57\n\u{1B}[2J" + String(repeating: "é", count: 400)
        let levels = [SessionLevel(device: phone.id, session: "s", seq: 12)]
        desk.run(.sinkHeld(sink: "clipboard", reason: reason, levels))
        let got = a.received(from: &desk)
        guard case .held(let notice)? = got.first, got.count == 1 else { Issue.record("\(got)"); return }
        #expect(notice.session == "s" && notice.seq == 12 && notice.sink == "clipboard")
        #expect(notice.reason.hasPrefix("xclip: Can't open display :57 [2J"))
        #expect(notice.reason.utf8.count <= HeldNotice.maxReasonBytes)
        #expect(!notice.reason.unicodeScalars.contains(where: PeerText.needsEscape))
        #expect(b.received(from: &desk) == [.held(notice)])
        #expect(o.received(from: &desk).isEmpty)
        // The same again: nothing; a new reason or a new position: told again.
        desk.run(.sinkHeld(sink: "clipboard", reason: reason, levels))
        #expect(a.received(from: &desk).isEmpty)
        desk.run(.sinkHeld(sink: "clipboard", reason: "xclip: killed", levels))
        #expect(a.received(from: &desk).count == 1)
        // A hold at a later chunk is news too.
        desk.run(.sinkHeld(sink: "clipboard", reason: "xclip: killed", [SessionLevel(device: phone.id, session: "s", seq: 13)]))
        #expect(a.received(from: &desk).map(\.type) == ["held"])
    }

    @Test("config: asked of the config module on session open and per message, answered encrypted; without it unknown-type")
    func config() throws {
        let phone = Phone.paired()
        var desk = Desk(clients: [phone.client], takesConfig: true)
        var s = try phone.open(&desk)
        guard case .configOpened(s.id, phone.id, "phone")? = desk.configAsks.first else { Issue.record("\(desk.configAsks)"); return }
        s.send(.config(type: "config-pull", body: .object([("batch", .string("b1"))])), to: &desk)
        guard case .configRequest(s.id, phone.id, "phone", "config-pull", _)? = desk.configAsks.last else {
            Issue.record("\(desk.configAsks)"); return
        }
        _ = s.received(from: &desk)
        desk.run(.configReplies(s.id, [.config(type: "config-result", body: .object([("batch", .string("b1"))]))]))
        #expect(s.received(from: &desk).map(\.type) == ["config-result"])
        // A reply for a connection that is gone is dropped.
        desk.run(.closed(s.id))
        desk.run(.configReplies(s.id, [.config(type: "config-result", body: .object([]))]))
        #expect(desk.frames[s.id, default: []].isEmpty)

        var plain = Desk(clients: [phone.client])
        var t = try phone.open(&plain)
        _ = t.received(from: &plain)
        t.send(.config(type: "config-pull", body: .object([])), to: &plain)
        guard case .error(.unknownType, _, _)? = t.received(from: &plain).first else { Issue.record("no unknown-type"); return }
        #expect(plain.configAsks.isEmpty)
    }
}
