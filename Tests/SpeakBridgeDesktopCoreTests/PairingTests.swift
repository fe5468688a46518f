import SpeakBridgeCrypto
@testable import SpeakBridgeDesktopCore
@testable import SpeakBridgeProtocol
import Testing

@Suite("Desktop core: pairing")
struct PairingTests {
    @Test("the right code pairs: saved first, paired only after the save, then the new psk opens a session")
    func rightCode() throws {
        var desk = Desk()
        let secret = desk.issueCode()
        var phone = Phone()
        var (machine, c) = try phone.startPairing(&desk, secret: secret, name: "pixel")
        #expect(desk.frames[c, default: []].isEmpty, "paired went out before the pairing was saved")
        #expect(!desk.core.status.pairingActive, "the code is single use")
        let (id, outcome, name, _, _) = try #require(desk.persisted.first)
        #expect(id == c && name == "pixel" && outcome.deviceID == phone.id)
        desk.run(.pairingSaved(c, outcome))
        var result: PairingResult?
        for frame in desk.take(c) {
            for case .paired(let r) in machine.receive(frame) { result = r }
        }
        let paired = try #require(result)
        #expect(paired.sessionKey == outcome.sessionKey)
        phone.psk = paired.sessionKey
        var session = try phone.open(&desk)
        #expect(session.received(from: &desk) == [.resume(session: "s", delivered: 0)])
        #expect(desk.core.status.connected.first?.name == "pixel")
    }

    @Test("a pairing that cannot be saved closes with 1011 and never says paired; counted once, as an error")
    func notSaved() throws {
        var desk = Desk()
        let secret = desk.issueCode()
        let phone = Phone()
        let (_, c) = try phone.startPairing(&desk, secret: secret)
        let (_, outcome, _, _, _) = try #require(desk.persisted.first)
        desk.run(.pairingNotSaved(c, outcome, message: "disk full", hint: nil))
        #expect(desk.frames[c, default: []].isEmpty)
        let reason = try #require(desk.closes[c])
        #expect(reason.closeCode.code == 1011)
        #expect(desk.core.stats.closedOnError == 1 && desk.core.stats.rejected == 0 && desk.core.stats.pairingFailures == 0)
        // Not paired: a session with that psk is refused.
        var again = phone
        again.psk = outcome.sessionKey
        let c2 = desk.newConnection()
        desk.run(.connected(c2, path: SpeakBridgeProtocol.sessionPath, remote: "127.0.0.1"))
        var m = try InitiatorMachine(intent: .session, localStatic: phone.key, desktopKey: Desk.publicKey,
                                     psk: outcome.sessionKey, firstMessage: .hello(agent: "t"))
        desk.run(.frame(c2, try m.start()))
        #expect(desk.closes[c2] == .rejected(.unknownDevice))
    }

    @Test("three wrong codes revoke the code: three pairing failures, no rejection; the right code is then refused")
    func wrongCodeRevokes() throws {
        var desk = Desk()
        let secret = desk.issueCode()
        for attempt in 1...SpeakBridgeProtocol.pairingMaxFailures {
            let (_, c) = try Phone().startPairing(&desk, secret: SymmetricKey.random())
            guard case .pairingFailed? = desk.closes[c] else { Issue.record("attempt \(attempt): \(String(describing: desk.closes[c]))"); return }
            #expect(desk.core.status.pairingActive == (attempt < SpeakBridgeProtocol.pairingMaxFailures))
        }
        #expect(desk.core.stats.pairingFailures == 3 && desk.core.stats.rejected == 0)
        #expect(desk.logs.contains { $0.message.contains("pairing code revoked after 3 failed attempts") })
        let (_, c) = try Phone().startPairing(&desk, secret: secret)
        #expect(desk.closes[c] == .rejected(.noPairingCode))
        #expect(desk.closes[c]?.closeCode.code == 1008)
        #expect(desk.persisted.isEmpty)
    }

    @Test("an expired code pairs nothing: refused at connect, and between connect and message 1")
    func expired() throws {
        var desk = Desk()
        let secret = desk.issueCode(lifetime: 120)
        // Connected while the code is live, message 1 after it expired.
        let c = desk.newConnection()
        desk.run(.connected(c, path: SpeakBridgeProtocol.pairPath, remote: "127.0.0.1"))
        #expect(desk.core.nextDeadline == desk.core.code.active?.expiry, "the shell wakes at the code's expiry")
        desk.now += 121
        desk.run(.tick)
        #expect(desk.core.nextDeadline == nil, "nothing timed: the shell need not wake")
        #expect(!desk.core.status.pairingActive)
        #expect(desk.core.code.active == nil, "the expired secret is dropped on the tick")
        var machine = try InitiatorMachine(intent: .pair, localStatic: X25519PrivateKey(), desktopKey: Desk.publicKey,
                                           psk: secret, firstMessage: .pair(name: "late"))
        desk.run(.frame(c, try machine.start()))
        #expect(desk.closes[c] == .rejected(.pairingCodeGone))
        #expect(desk.closes[c]?.closeCode.code == 1000, "a handshake refusal gives no hint")
        #expect(desk.frames[c, default: []].isEmpty)
        let (_, c2) = try Phone().startPairing(&desk, secret: secret)
        #expect(desk.closes[c2] == .rejected(.noPairingCode))
        #expect(desk.persisted.isEmpty)
    }

    @Test("a code is live while now < expiry (PROTOCOL.md): at its expiry it is dead, at connect and at message 1")
    func deadAtItsExpiry() throws {
        var desk = Desk()
        let issued = desk.now
        let secret = desk.issueCode(lifetime: 120)
        let c = desk.newConnection()
        desk.now = issued + 119.5
        desk.run(.connected(c, path: SpeakBridgeProtocol.pairPath, remote: "127.0.0.1"))
        #expect(desk.closes[c] == nil, "live a moment before its expiry")
        desk.now = issued + 120  // exactly the expiry (before 2026-12-07 the desktop still accepted it: now <= expiry)
        var machine = try InitiatorMachine(intent: .pair, localStatic: X25519PrivateKey(), desktopKey: Desk.publicKey,
                                           psk: secret, firstMessage: .pair(name: "on the second"))
        desk.run(.frame(c, try machine.start()))
        #expect(desk.closes[c] == .rejected(.pairingCodeGone))
        let (_, c2) = try Phone().startPairing(&desk, secret: secret)
        #expect(desk.closes[c2] == .rejected(.noPairingCode))
        #expect(desk.persisted.isEmpty)
    }

    @Test("a new code replaces the old one")
    func replaced() throws {
        var desk = Desk()
        let old = desk.issueCode()
        _ = desk.issueCode()
        let (_, c) = try Phone().startPairing(&desk, secret: old)
        guard case .pairingFailed? = desk.closes[c] else { Issue.record("\(String(describing: desk.closes[c]))"); return }
    }
}
