import SpeakBridgeClientCore
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing

/// `prepareHandshakes`: message 1 (e, es, s, ss) is sealed while the connections are being made, so that `opened`
/// only sends it. The session must come up with it exactly as before, and each attempt keeps its own ephemeral key.
@Suite("LinkCore: message 1 sealed while connecting")
struct PreparedHandshakeTests {
    @Test("sealed while dialing, sent on open: one ephemeral key per attempt; the session comes up, the lines go",
          arguments: NoiseCipher.allCases.filter(\.isAvailable))
    func preparedWhileDialing(cipher: NoiseCipher) {
        let bench = Bench(known: ["192.0.2.1", "192.0.2.2"], cipher: cipher)
        bench.addresses = ["192.0.2.1": .hanging, "192.0.2.2": .hanging]
        bench.append(["one", "two"])
        bench.send(.start)
        #expect(bench.hanging.count == 2)
        #expect(bench.core.link.preparedCount == 0)  // nothing is sealed unless the shell asks
        bench.core.prepareHandshakes()
        #expect(bench.core.link.preparedCount == 2)
        bench.core.prepareHandshakes()  // again: each attempt keeps the one it has
        #expect(bench.core.link.preparedCount == 2)

        let attempts = bench.hanging.sorted { $0.key < $1.key }
        bench.hanging.removeAll()
        for (id, candidate) in attempts { bench.connect(id, candidate, key: bench.desktopKey) }
        bench.events.removeAll()  // opened by hand below, to see each message 1
        var firsts: [[UInt8]] = []
        for (id, _) in attempts {
            let chosen = SpeakBridgeProtocol.subprotocol(for: cipher)
            let prepared = bench.core.link.preparedMessage(id)
            let actions = bench.core.handle(.connected(id, subprotocol: chosen), now: 0)
            guard actions.count == 1, case .send(let to, let frame)? = actions.first, to == id else {
                Issue.record("opening \(id) did not send message 1: \(actions)")
                return
            }
            #expect(prepared != nil && frame == prepared, "message 1 was sealed again instead of sent as prepared")
            firsts.append(frame)
            bench.toDesktop.append(.frame(id, frame))
        }
        #expect(bench.core.link.preparedCount == 0)
        #expect(Set(firsts.map { Array($0.prefix(32)) }).count == 2, "the two attempts share an ephemeral key")
        #expect(Set(bench.ciphers.values) == [cipher])
        bench.pump()
        #expect(bench.established)
        #expect(bench.received.map(\.text) == ["one", "two"])
        #expect(bench.journalAcked == 2)
    }

    @Test("a sealed attempt that fails to connect is forgotten with it; the redial seals anew")
    func preparedAttemptFails() {
        let bench = Bench()
        bench.addresses = ["192.0.2.1": .hanging]
        bench.send(.start)
        bench.core.prepareHandshakes()
        #expect(bench.core.link.preparedCount == 1)
        bench.fail("192.0.2.1")
        #expect(bench.core.link.preparedCount == 0)
        #expect(!bench.established)
        bench.addresses = ["192.0.2.1": .live]
        bench.run(until: 0.3)  // the redial after the backoff, opened at once: sealed on open as before
        #expect(bench.established)
    }

    @Test("AESGCM offered first: a desktop that answers `speakbridge.v1` gets message 1 sealed again under ChaChaPoly",
          .enabled(if: NoiseCipher.aesGCM.isAvailable, "this CPU has no AES-NI"))
    func preparedUnderTheOtherCipher() {
        let bench = Bench(cipher: .aesGCM)
        bench.desktopTakesAESGCM = false
        bench.addresses = ["192.0.2.1": .hanging]
        bench.append(["one", "two"])
        bench.send(.start)
        bench.core.prepareHandshakes()
        #expect(bench.core.link.preparedCount == 1)
        guard let (id, candidate) = bench.hanging.first else {
            Issue.record("nothing dialed")
            return
        }
        bench.hanging.removeAll()
        bench.connect(id, candidate, key: bench.desktopKey)
        bench.pump()
        #expect(bench.ciphers[id] == .chaChaPoly)
        #expect(bench.established)
        #expect(bench.received.map(\.text) == ["one", "two"])
        #expect(bench.journalAcked == 2)
    }

    @Test("each dial offers AESGCM first when it is preferred, then `speakbridge.v1`; ChaChaPoly alone otherwise")
    func offeredSubprotocols() {
        for (cipher, offer) in [(NoiseCipher.aesGCM, ["speakbridge.v1.aesgcm", "speakbridge.v1"]),
                                (.chaChaPoly, ["speakbridge.v1"])] {
            let bench = Bench(known: ["192.0.2.1", "192.0.2.2"], cipher: cipher)
            bench.addresses = ["192.0.2.1": .hanging, "192.0.2.2": .hanging]
            bench.send(.start)
            #expect(bench.offers.count == 2)
            #expect(bench.offers.values.allSatisfy { $0 == offer }, "\(cipher): \(bench.offers)")
        }
    }

    @Test("an answer that is not exactly one subprotocol offered closes the attempt before message 1 goes",
          arguments: [nil, "", "speakbridge.v1.aesgcm, speakbridge.v1", "speakbridge.v2", "speakbridge.v1.aesgcm"])
    func answerNotOffered(answer: String?) {
        let bench = Bench(cipher: .chaChaPoly)  // offers `speakbridge.v1` only: AESGCM was not offered either
        bench.addresses = ["192.0.2.1": .hanging]
        bench.send(.start)
        bench.core.prepareHandshakes()
        guard let (id, _) = bench.hanging.first else {
            Issue.record("nothing dialed")
            return
        }
        let actions = bench.core.handle(.connected(id, subprotocol: answer), now: 0)
        #expect(!actions.contains { if case .send = $0 { true } else { false } }, "\(actions)")
        #expect(actions.contains { if case .close(let closed) = $0 { closed == id } else { false } }, "\(actions)")
    }
}
