import SpeakBridgeProtocol
import Testing
@testable import SpeakBridgeClientCore

/// Issue 13, human pace: a `send` whose every line is acknowledged before its tick gets no tick at all (`Sender`
/// cancels it), so whatever the tick used to tidy must be tidied by the ack itself.
@Suite("ClientCore: lines acknowledged one by one with no tick in between")
struct HumanPaceTests {
    @Test("the per-line wait list is emptied by the ack that drains the window, not only by the tick")
    func ackDrainsTheWaitList() throws {
        let world = try AppendedAloneTests.pairedWorld()
        world.send(.start)
        for seq in 1...UInt64(200) {
            world.now += 0.1  // a phrase every 100 ms, never a tick
            AppendedAloneTests.sendAlone(world, Chunk(seq: seq, text: "phrase \(seq)"), fast: true)
            world.makeDurable()  // the desktop's fsync: the ack comes
            let core = try #require(world.client)
            #expect(core.window.isDrained)
            #expect(core.waitingSince.isEmpty, "line \(seq): \(core.waitingSince.count) entries kept")
        }
        // Still timed as before while a line waits: an unacknowledged line is listed until its ack.
        world.now += 0.1
        AppendedAloneTests.sendAlone(world, Chunk(seq: 201, text: "unacknowledged"), fast: true)
        #expect(world.client?.waitingSince.map(\.seq) == [201])
        world.makeDurable()
        #expect(world.client?.waitingSince.isEmpty == true)
    }
}
