import Testing
@testable import SpeakBridgeWebSocket

/// One direction of a loopback link for the direct-write tests: who sends, what counts its direct writes, and where
/// the frames arrive. DirectWriteTests (client → server) and ServerDirectWriteTests (server → client) run the same
/// checks through it.
struct DirectWriteFlow {
    let send: ([UInt8]) -> Void
    let directWrites: () -> Int
    let receiver: EventLog
    let receiverID: WebSocketConnectionID
    let pauseReceiver: () -> Void
    let resumeReceiver: () -> Void
    /// Sends one byte the other way; its arrival means the receiver's pause (a command before it) is in effect.
    let sendMarkBack: () -> Void
    let markLog: EventLog
    let markID: WebSocketConnectionID

    static func clientToServer(_ link: Loopback, client id: WebSocketConnectionID,
                               server serverSide: WebSocketConnectionID) -> DirectWriteFlow {
        DirectWriteFlow(send: { link.client.send($0, on: id) }, directWrites: { link.client.directWriteCount },
                        receiver: link.serverLog, receiverID: serverSide,
                        pauseReceiver: { link.server.pauseReceiving(serverSide) },
                        resumeReceiver: { link.server.resumeReceiving(serverSide) },
                        sendMarkBack: { link.server.send([0xFF], to: serverSide) }, markLog: link.log, markID: id)
    }

    static func serverToClient(_ link: Loopback, client id: WebSocketConnectionID,
                               server serverSide: WebSocketConnectionID) -> DirectWriteFlow {
        DirectWriteFlow(send: { link.server.send($0, to: serverSide) }, directWrites: { link.server.directWriteCount },
                        receiver: link.log, receiverID: id,
                        pauseReceiver: { link.client.pauseReceiving(id) },
                        resumeReceiver: { link.client.resumeReceiving(id) },
                        sendMarkBack: { link.client.send([0xFF], on: id) }, markLog: link.serverLog, markID: serverSide)
    }

    func received(_ events: [WebSocketEvent]? = nil) -> [[UInt8]] { receiver.messages(receiverID, events) }

    /// `count` frames one at a time, as paced lines come: each finds the connection free, is written at once and
    /// arrives, in order.
    func framesGoOutAtOnce(count: Int) async {
        let before = directWrites()
        for index in 0..<count {
            send(numbered(index))
            #expect(await receiver.wait { received($0).count == index + 1 })
        }
        #expect(directWrites() - before == count)
        #expect(received().map(number) == Array(0..<count))
    }

    /// A receiver that stops reading: the socket fills, lws keeps the rest of a frame, later frames wait in the
    /// sender's queue (not written at once); once it reads again everything arrives exactly once, in order, and a
    /// frame sent after that finds the connection free again.
    func framesQueueBehindAFullSocket() async throws {
        pauseReceiver()
        sendMarkBack()  // commands run in order: once this arrives, the pause is in effect
        #expect(await markLog.wait { markLog.messages(markID, $0) == [[0xFF]] })

        let before = directWrites()
        // Far more than loopback's socket buffers hold (a few MB at most).
        let count = 600
        for index in 0..<count { send(numbered(index, size: 60_000)) }
        try await Task.sleep(for: .milliseconds(300))
        let direct = directWrites() - before
        #expect(direct >= 1, "the first frame found the connection free")
        #expect(direct < count, "every frame was written at once, although the peer read nothing")
        #expect(received().isEmpty, "delivered while paused")

        resumeReceiver()
        #expect(await receiver.wait(timeout: .seconds(20)) { received($0).count >= count })
        #expect(received().map(number) == Array(0..<count))
        #expect(receiver.closedReason(receiverID) == nil)

        let drained = directWrites()
        send(numbered(count))
        #expect(await receiver.wait { received($0).count == count + 1 })
        #expect(directWrites() == drained + 1)
        #expect(received().last.map(number) == count)
    }
}
