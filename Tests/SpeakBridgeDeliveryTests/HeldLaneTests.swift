import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore
import SpeakBridgeSupport
import Testing
@testable import SpeakBridgeDelivery

/// A device the sink holds for a reason of its own (its session's window lost the focus, a text the method cannot
/// type) or whose long text is typed across turns never keeps another device's text waiting; its own texts keep
/// their order. The real pipeline and runner thread, with a test double where the typing tool would be.
@Suite("Delivery pipeline: a held device does not hold the others", .serialized)
struct HeldLaneTests {
    typealias SessionKey = DeliveryPipeline.SessionKey
    let hostile = DeviceID(publicKeyDigest: SHA256.hash(Array("held-lane-hostile".utf8)))
    let honest = DeviceID(publicKeyDigest: SHA256.hash(Array("held-lane-honest".utf8)))

    func chunks(_ range: ClosedRange<UInt64>) -> [Chunk] { range.map { Chunk(seq: $0, text: "chunk \($0)") } }

    @Test func anotherDevicesTextIsWrittenWhileOneDeviceIsHeldForItsOwnReason() throws {
        let root = DeliveryPipelineTests.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let reason = "focus moved from window \"editor\" to \"terminal\": held until focus returns"
        let sink = FakeSink("type", .recordBeforeWrite, itemsPerWrite: 1)
        sink.controls.withLock { $0.heldDevice = (hostile, reason) }
        let (pipeline, observed) = DeliveryPipelineTests().pipeline([sink], try ProgressLog(path: root + "/progress.log"))
        defer { pipeline.stop() }
        let held = SessionKey(device: hostile, session: "h")
        let fresh = SessionKey(device: honest, session: "s")

        _ = pipeline.submit(device: hostile, session: "h", chunks: chunks(1...3))
        try waitUntil("the hostile device's session reported held") {
            observed.held.withLock { $0.contains { $0.reason == reason } }
        }
        _ = pipeline.submit(device: honest, session: "s", chunks: chunks(1...2))
        try waitUntil("the other device's text written and acked", timeout: 5) { observed.ack(fresh) == 2 }
        #expect(sink.medium.items.allSatisfy { $0.device == honest })
        #expect(observed.ack(held) == 0)
        // Only the held device is told it is held: the other device's text was never held.
        let reports = observed.held.withLock { $0 }
        #expect(reports.allSatisfy { report in report.held.allSatisfy { $0.device == hostile } })
        #expect(reports.contains { $0.reason == reason
            && $0.held == [DeliveryPipeline.HeldChunk(device: hostile, session: "h", firstHeldSeq: 1)] })

        // Later texts of the other device go through too, every time.
        _ = pipeline.submit(device: honest, session: "s", chunks: chunks(3...3))
        try waitUntil("the other device's next text", timeout: 5) { observed.ack(fresh) == 3 }

        // The hold ends: the held session's texts come, once each and in order.
        sink.controls.withLock { $0.heldDevice = nil }
        try waitUntil("the held session written") { observed.ack(held) == 3 }
        #expect(sink.medium.items.filter { $0.device == hostile }.map(\.seq) == [1, 2, 3])
        #expect(sink.medium.items.filter { $0.device == honest }.map(\.seq) == [1, 2, 3])
    }

    @Test func aLongTextTypedAcrossTurnsLetsAnotherDeviceIn() throws {
        let root = DeliveryPipelineTests.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let sink = FakeSink("type", .recordBeforeWrite, itemsPerWrite: 1)
        sink.controls.withLock { $0.slowDevice = (hostile, Int.max) }
        let (pipeline, observed) = DeliveryPipelineTests().pipeline([sink], try ProgressLog(path: root + "/progress.log"))
        defer { pipeline.stop() }
        let long = SessionKey(device: hostile, session: "h")
        let fresh = SessionKey(device: honest, session: "s")

        _ = pipeline.submit(device: hostile, session: "h", chunks: chunks(1...2))
        try waitUntil("the long text's turns under way") { sink.controls.withLock { $0.turnsUsed } >= 2 }
        _ = pipeline.submit(device: honest, session: "s", chunks: chunks(1...1))
        try waitUntil("the other device's text written between two turns", timeout: 5) { observed.ack(fresh) == 1 }
        #expect(sink.medium.items.map(\.device) == [honest])
        // A used-up turn is no problem: nothing is reported held, `status` shows nothing.
        #expect(observed.held.withLock { $0.allSatisfy { $0.reason == nil } })
        #expect(pipeline.health().first?.problem == nil)

        sink.controls.withLock { $0.slowDevice = nil }
        try waitUntil("the long texts written") { observed.ack(long) == 2 }
        #expect(sink.medium.items.filter { $0.device == hostile }.map(\.seq) == [1, 2])
    }
}
