import SpeakBridgeClientCore
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing

/// `ClientCore.appendedAlone`, the paced line's path without arrays, against a desktop in memory: it applies only
/// when the line goes out alone on an established, resumed session, and then does exactly what
/// `handle(.appended([chunk]))` does; otherwise it changes nothing and the general path runs.
@Suite("ClientCore: a paced line alone, without the general path's arrays")
struct AppendedAloneTests {
    typealias World = CoreToCoreTests.World

    /// A paired world whose client has not started yet.
    static func pairedWorld(maxInFlight: Int = 64) throws -> World {
        let world = World()
        _ = try world.pairClient(session: "s-alone", maxInFlight: maxInFlight, jitterSeed: 7)
        return world
    }

    /// What `Sender.acceptAlone` does: the path without arrays when it applies, else `.appended`. Whether it applied.
    @discardableResult
    static func sendAlone(_ world: World, _ chunk: Chunk, fast: Bool) -> Bool {
        guard fast, var core = world.client, let alone = core.appendedAlone(chunk, now: world.now) else {
            world.send(.appended([chunk]))
            return false
        }
        world.client = core
        let actions: [ClientCore.Action]
        switch alone {
        case .frame(let id, let bytes): actions = [.send(id, bytes)]
        case .actions(let list): actions = list
        }
        for action in actions {
            guard case .send(let id, let bytes) = action else {
                Issue.record("unexpected action \(action)")
                continue
            }
            world.clientSends(id, bytes)
        }
        world.pump()
        return true
    }

    @Test("not started, not resumed, window full or input ended: nil, and nothing changed")
    func notApplicable() throws {
        let world = try Self.pairedWorld(maxInFlight: 2)
        var core = try #require(world.client)
        #expect(core.appendedAlone(Chunk(seq: 1, text: "early"), now: 0) == nil)
        #expect(core.window.pendingCount == 0)

        world.send(.start)
        #expect(world.client?.link.isEstablished == true)
        // Sent alone but never made durable on the desktop, so never acknowledged: the window fills.
        #expect(Self.sendAlone(world, Chunk(seq: 1, text: "one"), fast: true))
        #expect(Self.sendAlone(world, Chunk(seq: 2, text: "two"), fast: true))
        core = try #require(world.client)
        #expect(core.appendedAlone(Chunk(seq: 3, text: "three"), now: 0) == nil, "the window is full")
        #expect(core.window.pendingCount == 2)
        world.makeDurable()
        #expect(world.client?.window.pendingCount == 0)

        world.send(.inputEnded)  // drained and ended: the core exits 0
        core = try #require(world.client)
        #expect(core.appendedAlone(Chunk(seq: 3, text: "late"), now: 0) == nil)
        #expect(world.exitCode == 0)
    }

    @Test("1,000 lines one at a time across forced reconnects: the same lines, acks and exit as the general path")
    func sameAsTheGeneralPath() throws {
        var outcomes: [(written: [Chunk], acked: UInt64, exit: Int32?, alone: Int)] = []
        for fast in [false, true] {
            let world = try Self.pairedWorld()
            world.send(.start)
            var alone = 0
            for seq in 1...UInt64(1_000) {
                if Self.sendAlone(world, Chunk(seq: seq, text: "line \(seq)"), fast: fast) { alone += 1 }
                if seq % 7 == 0 { world.makeDurable() }
                // Cut after every 250th line: the next line finds no session (the general path queues it), and
                // the tick after it redials and resumes.
                if seq % 250 == 0 { world.cut() }
                if seq % 250 == 1 && seq > 1 { world.tick(to: world.now + 1) }
            }
            world.tick(to: world.now + 1)
            world.makeDurable()
            world.send(.inputEnded)
            world.makeDurable()
            outcomes.append((world.written, world.journalAcked, world.exitCode, alone))
        }
        let (general, fast) = (outcomes[0], outcomes[1])
        #expect(general.alone == 0)
        #expect(fast.alone > 900, "most lines went out alone")
        #expect(fast.written == general.written)
        #expect(fast.acked == general.acked)
        #expect(fast.exit == general.exit)
        #expect(fast.exit == 0)
        let seqs = fast.written.map(\.seq)
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "exactly once, in order")
    }
}
