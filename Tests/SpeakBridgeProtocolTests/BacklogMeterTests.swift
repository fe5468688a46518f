import Testing
@testable import SpeakBridgeProtocol

/// The backpressure rule: pause above the high-water mark, resume at the low-water mark, refuse at the hard limit.
@Suite("Backlog meter")
struct BacklogMeterTests {
    let a = DeviceID(publicKeyDigest: Array(repeating: 1, count: 32))
    let b = DeviceID(publicKeyDigest: Array(repeating: 2, count: 32))
    let limits = BacklogMeter.Limits(highChunks: 10, highBytes: 1_000, lowChunks: 4, lowBytes: 400,
                                     hardChunks: 20, hardBytes: 2_000)

    @Test func pausesAboveTheHighWaterMarkByCountOrBytesPerDevice() {
        var meter = BacklogMeter(sinks: 1, limits: limits)
        #expect(meter.submit(a, chunks: 10, bytes: 10) == .normal)
        #expect(meter.submit(a, chunks: 1, bytes: 1) == .pause)
        #expect(meter.isThrottled(a))
        #expect(meter.submit(b, chunks: 1, bytes: 1_001) == .pause)  // bytes alone
        var c = BacklogMeter(sinks: 1, limits: limits)
        #expect(c.submit(b, chunks: 1, bytes: 10) == .normal)
        #expect(!c.isThrottled(a))  // devices are independent
    }

    @Test func drainsOnlyWhenEverySinkTookEnoughAndReportsItOnce() {
        var meter = BacklogMeter(sinks: 2, limits: limits)
        #expect(meter.submit(a, chunks: 12, bytes: 120) == .pause)
        let first = meter.taken(a, sink: 0, chunks: 12, bytes: 120)
        #expect(!first)  // sink 1 still holds all 12
        #expect(meter.undelivered(a) == .init(chunks: 12, bytes: 120))
        let second = meter.taken(a, sink: 1, chunks: 7, bytes: 70)
        #expect(!second)  // 5 left: above the low mark
        let third = meter.taken(a, sink: 1, chunks: 1, bytes: 10)
        #expect(third)  // 4 left: drained
        #expect(!meter.isThrottled(a))
        let fourth = meter.taken(a, sink: 1, chunks: 4, bytes: 40)
        #expect(!fourth)  // not reported again
        #expect(meter.undelivered(a) == .init())
    }

    @Test func theHardLimitIsReachedByCountOrBytes() {
        var meter = BacklogMeter(sinks: 1, limits: limits)
        _ = meter.submit(a, chunks: 19, bytes: 19)
        #expect(!meter.isOverflowing(a))
        _ = meter.submit(a, chunks: 1, bytes: 1)
        #expect(meter.isOverflowing(a))
        _ = meter.submit(b, chunks: 1, bytes: 2_000)
        #expect(meter.isOverflowing(b))
        _ = meter.taken(a, sink: 0, chunks: 1, bytes: 1)
        #expect(!meter.isOverflowing(a))
    }

    @Test func hostileTotalsSaturateInsteadOfTrapping() {
        var meter = BacklogMeter(sinks: 1, limits: limits)
        _ = meter.submit(a, chunks: .max, bytes: .max)
        _ = meter.submit(a, chunks: .max, bytes: .max)
        #expect(meter.undelivered(a) == .init(chunks: .max, bytes: .max))
        _ = meter.taken(a, sink: 0, chunks: .max, bytes: .max)
        _ = meter.taken(a, sink: 0, chunks: .max, bytes: .max)
        _ = meter.taken(a, sink: 7, chunks: 1, bytes: 1)  // unknown sink: ignored
        #expect(meter.undelivered(a) == .init())
    }

    /// A revoked device's backlog goes (its sinks will not take it): not throttled, not overflowing, and the
    /// overflow count stays exact; later reports of it count from nothing.
    @Test func forgettingADeviceDropsItsBacklog() {
        var meter = BacklogMeter(sinks: 2, limits: limits)
        _ = meter.submit(a, chunks: 25, bytes: 100)
        _ = meter.submit(b, chunks: 3, bytes: 30)
        #expect(meter.isThrottled(a) && meter.isOverflowing(a) && meter.overflowingDevices == 1)
        meter.forget(a)
        #expect(meter.undelivered(a) == .init())
        #expect(!meter.isThrottled(a) && !meter.isOverflowing(a) && meter.overflowingDevices == 0)
        #expect(meter.undelivered(b) == .init(chunks: 3, bytes: 30))
        _ = meter.submit(a, chunks: 2, bytes: 20)
        #expect(meter.undelivered(a) == .init(chunks: 2, bytes: 20))
        meter.forget(DeviceID(publicKeyDigest: Array(repeating: 9, count: 32)))  // never seen: nothing changes
        #expect(meter.overflowingDevices == 0 && meter.undelivered(b) == .init(chunks: 3, bytes: 30))
    }
}

/// `overflowingDevices` / `mayOverflow` (the pipeline's lock-free "no device at the hard limit") always agree
/// with asking `isOverflowing` device by device.
@Suite("Backlog meter: overflow count")
struct BacklogMeterOverflowCountTests {
    @Test(arguments: [0, 1, 2])
    func theCountMatchesAskingEveryDevice(sinks: Int) {
        let devices = (0..<4).map { DeviceID(publicKeyDigest: Array(repeating: UInt8($0), count: 32)) }
        let limits = BacklogMeter.Limits(highChunks: 6, highBytes: 60, lowChunks: 2, lowBytes: 20,
                                         hardChunks: 10, hardBytes: 100)
        var meter = BacklogMeter(sinks: sinks, limits: limits)
        var rng = SystemRandomNumberGenerator()
        for step in 0..<3_000 {
            let device = devices.randomElement(using: &rng)!
            if sinks == 0 || Bool.random(using: &rng) {
                _ = meter.submit(device, chunks: .random(in: 0...4, using: &rng), bytes: .random(in: 0...40, using: &rng))
            } else {
                _ = meter.taken(device, sink: .random(in: 0..<sinks, using: &rng), chunks: .random(in: 0...5, using: &rng),
                                bytes: .random(in: 0...50, using: &rng))
            }
            let over = devices.filter { meter.isOverflowing($0) }.count
            #expect(meter.overflowingDevices == over, "step \(step)")
            #expect(meter.mayOverflow == (over > 0), "step \(step)")
        }
        // Limits that refuse even an empty backlog: every device, known or not, overflows.
        let zero = BacklogMeter(sinks: 1, limits: .init(highChunks: 0, highBytes: 0, lowChunks: 0, lowBytes: 0,
                                                         hardChunks: 0, hardBytes: 0))
        #expect(zero.mayOverflow && zero.isOverflowing(devices[0]))
    }
}
