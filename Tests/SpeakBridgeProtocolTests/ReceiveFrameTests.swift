import SpeakBridgeCrypto
import Testing
@testable import SpeakBridgeProtocol

/// `ResponderMachine.receiveFrame` (the desktop's per-frame entry: a chunk message comes back as `.deliver`
/// itself) against `receive(_:context:)`: two copies of one established machine fed the same frames give the
/// same actions and the same state (the encrypted answers, deterministic under one key and nonce, compare equal).
@Suite("receiveFrame is receive with the chunk case apart")
struct ReceiveFrameTests {
    let desktop = X25519PrivateKey()
    let phone = X25519PrivateKey()
    let psk = SymmetricKey.random()

    func context() -> ResponderContext {
        ResponderContext(localStatic: desktop, localName: "desk", pairingSecret: { nil },
                         sessionPSK: { [phone, psk] in $0 == phone.publicKey ? psk : nil }, delivered: { _, _ in 5 })
    }

    static func frame(_ actions: [InitiatorMachine.Action]) -> [UInt8]? {
        actions.compactMap { if case .send(let f) = $0 { return f } else { return nil } }.first
    }

    static func flattened(_ received: ResponderMachine.Received) -> [ResponderMachine.Action] {
        switch received {
        case let .deliver(device, session, chunks): return [.deliver(device, session: session, chunks)]
        case .actions(let actions): return actions
        }
    }

    @Test("chunks, batches, resume, config, errors, bye and garbage: same actions, same later behaviour")
    func sameAsReceive() throws {
        var responder = ResponderMachine(intent: .session, context: context())
        var initiator = try InitiatorMachine(intent: .session, localStatic: phone, desktopKey: desktop.publicKey,
                                             psk: psk, firstMessage: .hello(agent: "test"))
        let reply = responder.receive(try initiator.start())
        let message2 = try #require(reply.compactMap { if case .send(let f) = $0 { return f } else { return nil } }.first)
        _ = initiator.receive(message2)
        var frames: [[UInt8]] = []
        let messages: [Message] = [
            .resume(session: "s", delivered: nil), .chunk(session: "s", Chunk(seq: 6, text: "one")),
            .chunks(session: "s", [Chunk(seq: 7, text: "two", final: false), Chunk(seq: 8, text: "é \"q\"")]),
            .chunk(session: "t-2", Chunk(seq: 1, text: "", final: false)),
            .chunk(session: "s", Chunk(seq: 9, text: "with extras", lang: "en", speaker: "a", start: 1, end: 2)),
            .paired, .error(code: .malformed, message: "x", expected: nil), .bye,
        ]
        for message in messages { frames.append(try #require(Self.frame(initiator.encryptAndSend(message)))) }
        frames.append([UInt8](repeating: 0x42, count: 40))  // undecryptable
        // Every prefix of the frame list: the first frame authenticates; the rest runs on an established machine.
        for end in 1...frames.count {
            var general = responder
            var split = responder
            for frame in frames[..<end] {
                let a = general.receive(frame, context: context)
                let b = Self.flattened(split.receiveFrame(frame, context: context))
                #expect(String(describing: a) == String(describing: b), "frame \(end)")
                #expect(general.isEstablished == split.isEstablished && general.peer == split.peer)
            }
            // The state after them is the same: the next ack encrypts to the same bytes.
            #expect(String(describing: general.acknowledgeFrame(session: "s", through: 9))
                    == String(describing: split.acknowledgeFrame(session: "s", through: 9)))
        }
        // A chunk on an established machine comes back as `.deliver` itself.
        var established = responder
        _ = established.receive(frames[0], context: context)
        guard case let .deliver(_, session, chunks) = established.receiveFrame(frames[1], context: context) else {
            Issue.record("a chunk did not come back as .deliver")
            return
        }
        #expect(session == "s" && chunks == [Chunk(seq: 6, text: "one")])
    }
}
