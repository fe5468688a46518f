import SpeakBridgeSinks

/// Drives a sink the way the daemon does: wait until ready, deliver the rest, resume from `delivered` on errors.
/// Records every `willComplete` value (as absolute counts) and every failure.
struct DeliveryDriver {
    var progress: [Int] = []
    var failures: [SinkError] = []
    var waitReasons: [String] = []

    /// Delivers all `texts`; returns false if the sink was not ready within `patience` in one wait.
    mutating func run(_ sink: any Sink, _ texts: [String], batch: Int = 64, patience: Duration = .seconds(20)) -> Bool {
        var next = 0
        while next < texts.count {
            if let reason = sink.waitUntilReady(timeout: patience) {
                waitReasons.append(reason)
                return false
            }
            let end = min(next + batch, texts.count)
            let base = next
            var recorded: [Int] = []
            do {
                try sink.deliver(Array(texts[next..<end])) { k in recorded.append(base + k) }
                next = end
            } catch {
                failures.append(error)
                next += error.delivered
            }
            progress.append(contentsOf: recorded)
        }
        return true
    }
}
