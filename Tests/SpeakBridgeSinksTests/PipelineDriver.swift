import Foundation
import SpeakBridgeCrypto
import SpeakBridgeDelivery
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeSupport

/// Drives a real sink through the real `DeliveryPipeline` (its runner thread, its progress log in a temporary
/// directory), the way the daemon does: texts are submitted as one device's session in messages of `batch`
/// chunks, and `run` waits until all of them are durable (acked).
struct PipelineDriver {
    static let device = DeviceID(publicKeyDigest: SHA256.hash(Array("pipeline-driver".utf8)))
    let session = "s"

    struct Outcome {
        /// The ack level the pipeline reached.
        var durable: UInt64
        /// The sink's progress in the log.
        var recorded: UInt64?
        /// What `onHeld` reported (reasons), in order.
        var held: [String]
    }

    /// Submits `texts` (seq 1…) and waits at most `patience` for all to be durable.
    func run(_ sink: any Sink, _ texts: [String], name: String? = nil, batch: Int = 64,
             patience: Duration = .seconds(60)) throws -> Outcome {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let log = try ProgressLog(path: directory.path + "/progress.log")
        let acked = Locked<UInt64>(0)
        let held = Locked<[String]>([])
        let pipeline = DeliveryPipeline(sinks: [sink], progress: log, onDurable: { advanced in
            acked.withLock { level in for (_, seq) in advanced { level = max(level, seq) } }
        }, onDrained: { _ in }, onHeld: { _, reason, _ in held.withLock { $0.append(reason ?? "cleared") } })
        var seq: UInt64 = 0
        for start in stride(from: 0, to: texts.count, by: batch) {
            let chunks = texts[start..<min(start + batch, texts.count)].map { text in
                seq += 1
                return Chunk(seq: seq, text: text)
            }
            _ = pipeline.submit(device: Self.device, session: session, chunks: chunks, name: name)
        }
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: patience)
        while acked.withLock({ $0 }) < UInt64(texts.count), clock.now < deadline { sleepFor(.milliseconds(5)) }
        pipeline.stop()
        return Outcome(durable: acked.withLock { $0 },
                       recorded: log.progress(sink: sink.label, device: Self.device, session: session),
                       held: held.withLock { $0 })
    }
}
