// InMemorySession: a desktop and a phone pair and run two sessions in memory, with the package's own state
// machines. No socket, no file, no clock: frames are handed across by this program, which prints each step.
//
//   swift run InMemorySession
//
// Flow: pair (4 messages) -> session 1: resume, three chunks, one ack, then the connection "drops" ->
// session 2: resume says 2 are delivered, the client resends chunk 3 and sends chunk 4, the desktop's ledger drops
// the duplicate, every chunk reaches the "sink" exactly once.
import SpeakBridgeCrypto
import SpeakBridgeProtocol

/// Everything the demo's two "devices" hold, in one object the machines' lookup closures can capture.
final class Demo {
    let desktopKey = X25519PrivateKey()
    let phoneKey = X25519PrivateKey()
    let secret = SecureRandom.bytes(32)  // what the pairing code would carry
    var pairedPSK: [UInt8]?              // what the desktop stores for the phone
    var ledger = SessionLedger()
    var sink: [String] = []

    func context() -> ResponderContext {
        ResponderContext(localStatic: desktopKey, localName: "desk",
                         pairingSecret: { [secret] in try? SymmetricKey(bytes: secret) },
                         sessionPSK: { [unowned self] key in
                             key == phoneKey.publicKey ? pairedPSK.flatMap { try? SymmetricKey(bytes: $0) } : nil
                         },
                         delivered: { [unowned self] _, session in ledger.entry(session)?.delivered ?? 0 })
    }

    func step(_ who: String, _ what: String) { print("\(who + String(repeating: " ", count: max(0, 8 - who.count))) \(what)") }

    func frames(_ actions: [ResponderMachine.Action]) -> [[UInt8]] {
        actions.compactMap { if case .send(let f) = $0 { return f } else { return nil } }
    }

    func frames(_ actions: [InitiatorMachine.Action]) -> [[UInt8]] {
        actions.compactMap { if case .send(let f) = $0 { return f } else { return nil } }
    }

    /// Carries frames between the two machines until both are quiet; returns what the phone received.
    func exchange(_ desktop: inout ResponderMachine, _ phone: inout InitiatorMachine, toDesktop first: [[UInt8]])
        -> [InitiatorMachine.Action] {
        var toDesktop = first
        var received: [InitiatorMachine.Action] = []
        while !toDesktop.isEmpty {
            var toPhone: [[UInt8]] = []
            for frame in toDesktop {
                step("phone", "-> \(frame.count) bytes")
                let actions = desktop.receive(frame)
                for action in actions { describe(action, &desktop) }
                toPhone += frames(actions)
                for case .deliver(_, let session, let chunks) in actions {
                    let offer = ledger.offer(session: session, chunks: chunks)
                    for chunk in offer.accepted { sink.append(chunk.text) }
                    step("desktop", "ledger: \(offer.accepted.count) new, \(offer.duplicates) duplicate(s) dropped")
                    if let last = offer.accepted.last {
                        ledger.markDelivered(session: session, through: last.seq)  // "every sink took it, durably"
                        toPhone += frames(desktop.acknowledge(session: session, through: last.seq))
                    } else if let ack = offer.immediateAck {
                        toPhone += frames(desktop.acknowledge(session: session, through: ack))
                    }
                }
            }
            toDesktop = []
            for frame in toPhone {
                step("desktop", "-> \(frame.count) bytes")
                let actions = phone.receive(frame)
                received += actions
                for action in actions {
                    switch action {
                    case .received(let m): step("phone", "received \(String(decoding: MessageCodec.encode(m), as: UTF8.self))")
                    case .paired(let r): step("phone", "paired with \(r.desktopID), psk derived")
                    case .established: step("phone", "session established")
                    case .close(let reason): step("phone", "closes: \(reason)")
                    case .send(let f): toDesktop.append(f)
                    }
                }
            }
        }
        return received
    }

    func describe(_ action: ResponderMachine.Action, _ desktop: inout ResponderMachine) {
        switch action {
        case .consumePairingCode: step("desktop", "message 1 decrypted under the code's secret: code used up")
        case .pairingConfirmed(let outcome):
            pairedPSK = outcome.sessionPSK
            step("desktop", "pair-confirm decrypted: paired with \"\(outcome.peerName)\" (\(outcome.deviceID))")
        case .authenticated(let id, _): step("desktop", "session handshake done: device \(id)")
        case .deliver(_, let session, let chunks): step("desktop", "deliver \(chunks.map(\.seq)) of session \(session)")
        case .close(let reason): step("desktop", "closes: \(reason)")
        case .pairingAttemptFailed: step("desktop", "failed pairing attempt")
        case .config(_, let type, _): step("desktop", "\(type) is for the config module (not in this demo)")
        case .resumed(_, let session): step("desktop", "resume of session \(session) answered (a held sink would say so next)")
        case .send: break
        }
    }

    func send(_ phone: inout InitiatorMachine, _ messages: [Message]) -> [[UInt8]] {
        messages.flatMap { message -> [[UInt8]] in
            step("phone", "sends \(String(decoding: MessageCodec.encode(message), as: UTF8.self))")
            return frames(phone.encryptAndSend(message))
        }
    }

    /// What the window sends (`OutboxWindow.Outgoing`): a message sealed as above, a batch already encoded sealed as
    /// it is (as `send` does).
    func send(_ phone: inout InitiatorMachine, _ outgoing: [OutboxWindow.Outgoing]) -> [[UInt8]] {
        outgoing.flatMap { item -> [[UInt8]] in
            switch item {
            case .message(let message):
                return send(&phone, [message])
            case .encoded(let plaintext):
                step("phone", "sends \(String(decoding: plaintext, as: UTF8.self))")
                if case .frame(let frame) = phone.seal(encoded: plaintext) { return [frame] }
                return []
            }
        }
    }

    func run() {
    do {
        print("-- pairing (path /speakbridge.v1/pair)")
        var desktop = ResponderMachine(intent: .pair, context: context())
        var phone = try InitiatorMachine(intent: .pair, localStatic: phoneKey, desktopKey: desktopKey.publicKey,
                                         psk: secret, firstMessage: .pair(name: "pixel"))
        var phonePSK: [UInt8] = []
        for case .paired(let result) in exchange(&desktop, &phone, toDesktop: [try phone.start()]) {
            phonePSK = result.sessionPSK
        }
        print("   both sides hold the same per-pair psk: \(phonePSK == pairedPSK)")

        // At most 2 chunks in flight, so that the third is still on its way when the connection drops.
        var window = OutboxWindow(session: "s-demo", pending: [], maxInFlight: 2)
        for (n, text) in ["Dear team,", "the build is green.", "Thanks!"].enumerated() {
            _ = window.appendOutgoing(contentsOf: [Chunk(seq: UInt64(n + 1), text: text)])
        }

        print("\n-- session 1 (path /speakbridge.v1/session)")
        desktop = ResponderMachine(intent: .session, context: context())
        phone = try InitiatorMachine(intent: .session, localStatic: phoneKey, desktopKey: desktopKey.publicKey,
                                     psk: phonePSK, firstMessage: .hello(agent: "in-memory/1"))
        _ = exchange(&desktop, &phone, toDesktop: [try phone.start()])
        var answers = exchange(&desktop, &phone, toDesktop: send(&phone, [.resume(session: "s-demo", delivered: nil)]))
        for case .received(.resume(_, let delivered?)) in answers {
            answers = exchange(&desktop, &phone,
                               toDesktop: send(&phone, window.resumedOutgoing(delivered: delivered, now: 0)))
        }
        for case .received(.ack(_, let seq)) in answers {
            _ = send(&phone, window.ackOutgoing(seq, now: 1))  // encrypted, but the connection drops before it arrives
        }
        print("   the connection drops; unacknowledged: \(window.pending.map(\.seq))")
        window.connectionLost()
        _ = window.appendOutgoing(contentsOf: [Chunk(seq: 4, text: "P.S. see you at 3.")])

        print("\n-- session 2: resume and resend")
        desktop = ResponderMachine(intent: .session, context: context())
        phone = try InitiatorMachine(intent: .session, localStatic: phoneKey, desktopKey: desktopKey.publicKey,
                                     psk: phonePSK, firstMessage: .hello(agent: "in-memory/1"))
        _ = exchange(&desktop, &phone, toDesktop: [try phone.start()])
        answers = exchange(&desktop, &phone, toDesktop: send(&phone, [.resume(session: "s-demo", delivered: nil)]))
        for case .received(.resume(_, let delivered?)) in answers {
            answers = exchange(&desktop, &phone,
                               toDesktop: send(&phone, window.resumedOutgoing(delivered: delivered, now: 2)))
        }
        for case .received(.ack(_, let seq)) in answers { _ = window.ackOutgoing(seq, now: 3) }
        // A stale resend of chunk 1 (say, from a duplicated connection) is dropped by the ledger.
        _ = exchange(&desktop, &phone, toDesktop: send(&phone, [.chunk(session: "s-demo", Chunk(seq: 1, text: "Dear team,"))]))
        _ = exchange(&desktop, &phone, toDesktop: send(&phone, [.bye]))

        print("\n-- the sink received, exactly once and in order:")
        for line in sink { print("   \(line)") }
        print("   outbox drained: \(window.isDrained)")
    } catch {
        print("in-memory session failed: \(error)")
    }
    }
}

Demo().run()
