import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore
import SpeakBridgeSupport
import Synchronization
import Testing
@testable import SpeakBridgeDelivery

/// `DeliveryPipeline.isOverflowing` answers "no" without its lock while no device is at the hard limit; it must
/// still say "yes" the moment a device reaches it, and "no" again once the sinks took enough.
@Suite("Pipeline overflow fast path", .serialized)
struct OverflowFastPathTests {
    @Test func aDeviceAtTheHardLimitOverflowsAndStopsWhenTheSinkCatchesUp() throws {
        let root = "/tmp/sb-overflow-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(root, 0o700)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let device = DeviceID(publicKeyDigest: SHA256.hash(Array("overflow-device".utf8)))
        let other = DeviceID(publicKeyDigest: SHA256.hash(Array("calm-device".utf8)))
        let sink = FakeSink("fifo:/x", .recordBeforeWrite)
        sink.controls.withLock { $0.notReady = "no reader on FIFO /x" }  // takes nothing until told
        let limits = BacklogMeter.Limits(highChunks: 2, highBytes: 1 << 20, lowChunks: 1, lowBytes: 1 << 20,
                                         hardChunks: 4, hardBytes: 1 << 20)
        let pipeline = DeliveryPipeline(sinks: [sink], progress: try ProgressLog(path: root + "/progress.log"),
                                        limits: limits, onDurable: { _ in }, onDrained: { _ in })
        defer { pipeline.stop() }
        #expect(!pipeline.isOverflowing(device))
        _ = pipeline.submit(device: device, session: "s", chunks: (1...3).map { Chunk(seq: $0, text: "t") })
        #expect(!pipeline.isOverflowing(device), "3 chunks are under the hard limit of 4")
        _ = pipeline.submit(device: device, session: "s", chunks: [Chunk(seq: 4, text: "t")])
        #expect(pipeline.isOverflowing(device), "4 chunks reach the hard limit")
        #expect(!pipeline.isOverflowing(other), "another device is not refused")
        sink.controls.withLock { $0.notReady = nil }
        let deadline = Date().addingTimeInterval(10)
        while pipeline.isOverflowing(device) && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(!pipeline.isOverflowing(device), "the sink took them: no longer overflowing")
        let mayOverflow = pipeline.mayOverflow.load(ordering: .acquiring)
        #expect(!mayOverflow, "and the fast path is back")
    }
}
