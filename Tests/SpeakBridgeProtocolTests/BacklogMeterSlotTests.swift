import Testing
@testable import SpeakBridgeProtocol

/// The meter keeps each device's counts in a slot and remembers the last device: interleaved devices, many sinks
/// and random traffic give exactly what a plain per-device table gives.
@Suite struct BacklogMeterSlotTests {
    /// The rule, written plainly: per device, submitted and taken per sink; the backlog is submitted minus the
    /// least taken; pause above the high mark, drained at or below the low mark once paused.
    struct Reference {
        let limits: BacklogMeter.Limits
        let sinks: Int
        var submitted: [DeviceID: (UInt64, UInt64)] = [:]
        var taken: [DeviceID: [(UInt64, UInt64)]] = [:]
        var throttled: Set<DeviceID> = []

        func undelivered(_ d: DeviceID) -> BacklogMeter.Level {
            guard sinks > 0, let s = submitted[d] ?? (taken[d] != nil ? (0, 0) : nil) else { return .init() }
            let t = taken[d] ?? Array(repeating: (0, 0), count: sinks)
            let c = t.map(\.0).min() ?? 0, b = t.map(\.1).min() ?? 0
            return .init(chunks: s.0 - min(s.0, c), bytes: s.1 - min(s.1, b))
        }

        mutating func submit(_ d: DeviceID, _ c: UInt64, _ b: UInt64) -> BacklogMeter.Pressure {
            let s = submitted[d] ?? (0, 0)
            submitted[d] = (s.0 + c, s.1 + b)
            if taken[d] == nil { taken[d] = Array(repeating: (0, 0), count: sinks) }
            let u = undelivered(d)
            guard u.chunks > limits.highChunks || u.bytes > limits.highBytes else { return .normal }
            throttled.insert(d)
            return .pause
        }

        mutating func take(_ d: DeviceID, _ sink: Int, _ c: UInt64, _ b: UInt64) -> Bool {
            guard sink >= 0, sink < sinks else { return false }
            if taken[d] == nil { taken[d] = Array(repeating: (0, 0), count: sinks) }
            if submitted[d] == nil { submitted[d] = (0, 0) }
            taken[d]![sink].0 += c
            taken[d]![sink].1 += b
            let u = undelivered(d)
            guard throttled.contains(d), u.chunks <= limits.lowChunks && u.bytes <= limits.lowBytes else { return false }
            throttled.remove(d)
            return true
        }
    }

    @Test("random submits and takes over interleaved devices match the plain rule")
    func matchesReference() {
        var generator = SystemRandomNumberGenerator()
        let limits = BacklogMeter.Limits(highChunks: 20, highBytes: 400, lowChunks: 5, lowBytes: 100,
                                         hardChunks: 40, hardBytes: 800)
        let devices = (0..<4).map { DeviceID(publicKeyDigest: Array(repeating: UInt8($0), count: 32)) }
        for sinks in [1, 2, 3] {
            var meter = BacklogMeter(sinks: sinks, limits: limits)
            var reference = Reference(limits: limits, sinks: sinks)
            for step in 0..<3_000 {
                // Runs of one device (the cache hit) and switches (the miss), as traffic comes.
                let device = devices[Int.random(in: 0..<(step % 50 < 40 ? 1 : devices.count), using: &generator)]
                if Bool.random(using: &generator) {
                    let c = UInt64.random(in: 1...4, using: &generator), b = UInt64.random(in: 0...60, using: &generator)
                    #expect(meter.submit(device, chunks: c, bytes: b) == reference.submit(device, c, b))
                } else {
                    let sink = Int.random(in: 0..<sinks, using: &generator)
                    let c = UInt64.random(in: 0...3, using: &generator), b = UInt64.random(in: 0...50, using: &generator)
                    #expect(meter.taken(device, sink: sink, chunks: c, bytes: b) == reference.take(device, sink, c, b))
                }
                #expect(meter.undelivered(device) == reference.undelivered(device))
                #expect(meter.isThrottled(device) == reference.throttled.contains(device))
            }
            for device in devices {
                #expect(meter.undelivered(device) == reference.undelivered(device))
            }
            #expect(meter.undelivered(DeviceID(publicKeyDigest: Array(repeating: 99, count: 32))) == .init())
        }
    }
}
