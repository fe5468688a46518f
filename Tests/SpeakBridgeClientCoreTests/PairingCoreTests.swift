import SpeakBridgeClientCore
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing

/// `join`'s decisions in memory against a real `ResponderMachine` in pairing mode (the network is the double:
/// each address opens, fails or hangs as the test says).
@Suite("PairingCore: join against a desktop in memory")
struct PairingCoreTests {
    enum Address { case live, dead, hanging }

    final class Desk {
        let key = X25519PrivateKey()
        let device = X25519PrivateKey()
        let secret = SymmetricKey.random()
        /// The secret the desktop's current code has (nil: none shown).
        var shown: SymmetricKey?
        var addresses: [String: Address] = [:]
        var core: PairingCore
        var machines: [AttemptID: ResponderMachine] = [:]
        var events: [(AttemptID, [UInt8]?)] = []  // nil bytes: opened
        var closedEvents: [(AttemptID, String)] = []
        var outcome: PairingCore.Action?
        var confirmed: PairingOutcome?
        var hanging: Set<AttemptID> = []

        init(hosts: [String], browsing: Bool = false, codeSecret: SymmetricKey? = nil) {
            shown = secret
            core = PairingCore(localStatic: device, desktopKey: key.publicKey, secret: codeSecret ?? secret,
                               name: "phone", candidates: hosts.map { Candidate(host: $0, port: 7777, source: "code") },
                               browsing: browsing)
            for h in hosts { addresses[h] = .live }
        }

        func start() { perform(core.start()) }

        func perform(_ actions: [PairingCore.Action]) {
            for action in actions {
                switch action {
                case .dial(let id, let c, _, _):
                    switch addresses[c.host] ?? .dead {
                    case .live:
                        let context = ResponderContext(localStatic: key, localName: "office",
                                                       pairingSecret: { [unowned self] in shown },
                                                       sessionPSK: { _ in nil }, delivered: { _, _ in 0 })
                        machines[id] = ResponderMachine(intent: .pair, context: context)
                        perform(core.opened(id, subprotocol: "speakbridge.v1"))
                    case .dead: perform(core.closed(id, reason: "connect failed: connection refused"))
                    case .hanging: hanging.insert(id)
                    }
                case .send(let id, let bytes):
                    guard var m = machines[id] else { continue }
                    let answers = m.receive(bytes)
                    machines[id] = m
                    for answer in answers {
                        switch answer {
                        case .send(let frame): perform(core.frame(id, frame))
                        case .consumePairingCode: shown = nil
                        case .pairingConfirmed(let outcome): confirmed = outcome
                        case .close:
                            machines[id] = nil
                            perform(core.closed(id, reason: "peer close 1000"))
                        default: break
                        }
                    }
                case .close(let id):
                    if machines.removeValue(forKey: id) != nil || hanging.remove(id) != nil {
                        perform(core.closed(id, reason: "local close 1000"))
                    }
                case .paired, .failed:
                    outcome = action
                }
            }
        }
    }

    @Test("the code's second address answers while the first hangs: paired there, both sides hold the same psk")
    func pairsOnSecondAddress() throws {
        let desk = Desk(hosts: ["192.0.2.1", "192.0.2.2"])
        desk.addresses["192.0.2.1"] = .hanging
        desk.start()
        guard case .paired(let result, let candidate)? = desk.outcome else {
            Issue.record("not paired: \(String(describing: desk.outcome))")
            return
        }
        #expect(candidate.host == "192.0.2.2")
        #expect(result.desktopName == "office")
        #expect(desk.confirmed?.sessionKey == result.sessionKey)
        #expect(desk.hanging.isEmpty)  // the other attempt was closed
    }

    @Test("a wrong or used code: refused")
    func wrongCode() {
        let desk = Desk(hosts: ["192.0.2.1"], codeSecret: SymmetricKey.random())
        desk.start()
        guard case .failed(let failure)? = desk.outcome else {
            Issue.record("no failure")
            return
        }
        #expect(failure == .refused)
    }

    @Test("nothing answers: unreachable at once without mDNS, only the timeout while mDNS browses")
    func unreachable() {
        let desk = Desk(hosts: ["192.0.2.1"])
        desk.addresses["192.0.2.1"] = .dead
        desk.start()
        guard case .failed(let failure)? = desk.outcome else {
            Issue.record("no failure")
            return
        }
        #expect(failure == .unreachable("192.0.2.1:7777: connect failed: connection refused"))

        let browsing = Desk(hosts: ["192.0.2.1"], browsing: true)
        browsing.addresses["192.0.2.1"] = .dead
        browsing.start()
        #expect(browsing.outcome == nil)
        browsing.perform(browsing.core.timedOut())
        guard case .failed(.timedOut)? = browsing.outcome else {
            Issue.record("no timeout")
            return
        }
    }
}
