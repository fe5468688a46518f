import Foundation
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeSupport

/// What a fake sink has shown, kept outside the sink so it outlives a "crash" (like a file or a reader's buffer).
final class FakeMedium: Sendable {
    let written = Locked<[SinkItem]>([])

    var items: [SinkItem] { written.withLock { $0 } }
    var seqs: [UInt64] { items.map(\.chunk.seq) }

    /// seq → how many times it was shown, for 1...n.
    func tally(through n: UInt64) -> (lost: [UInt64], repeated: [UInt64]) {
        var counts: [UInt64: Int] = [:]
        for seq in seqs { counts[seq, default: 0] += 1 }
        let lost = (1...n).filter { counts[$0] == nil }
        let repeated = (1...n).filter { (counts[$0] ?? 0) > 1 }
        return (lost, repeated)
    }
}

/// An in-memory sink for the pipeline's tests (the test double stands where a FIFO, a file or a tool would be;
/// the pipeline, its runner threads and its progress log are the real ones). It writes `itemsPerWrite` items per
/// "write", calls `willWrite`/`didWrite` around each as the `Sink` contract says, and can be told to fail, to be
/// not ready, or to crash: freeze (never return) right before or right after a given write, as a process killed
/// there would.
final class FakeSink: Sink {
    enum CrashPoint: Sendable, Equatable {
        /// After `willWrite` of write number n (1-based), before its bytes reach the medium.
        case beforeWrite(Int)
        /// After write number n reached the medium, before `didWrite`.
        case afterWrite(Int)
    }

    struct Controls: Sendable {
        var crash: CrashPoint?
        /// Each deliver fails with this message before writing anything (a tool that exits non-zero).
        var failure: String?
        /// `waitUntilReady` answers this reason (a FIFO without reader).
        var notReady: String?
        /// Write number n (1-based) pauses after its `willWrite`, before its bytes reach the medium, until the
        /// test signals `resume` (a slow tool run under way): `holding` is signalled when it pauses.
        var hold: Int?
        /// This device's texts are held for a reason of their own (`SinkError.Scope.session`: a typing sink whose
        /// session's window lost the focus), with this message; other devices' texts are written.
        var heldDevice: (device: DeviceID, reason: String)?
        /// Each write of this device's texts uses up `turns` calls (`SinkError.Scope.turnUsedUp`) before it is
        /// written, as a long text typed across several turns; `turnsUsed` counts them.
        var slowDevice: (device: DeviceID, turns: Int)?
        var turnsUsed = 0
        var writes = 0
        var crashed = false
    }

    let label: String
    let deliveryClass: DeliveryClass
    let medium: FakeMedium
    let itemsPerWrite: Int
    let controls: Locked<Controls>
    /// Signalled when the sink froze at its crash point; the frozen thread waits for `release`.
    let crashed = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let holding = DispatchSemaphore(value: 0)
    let resume = DispatchSemaphore(value: 0)

    init(_ label: String, _ deliveryClass: DeliveryClass, medium: FakeMedium = FakeMedium(), itemsPerWrite: Int = 2,
         crash: CrashPoint? = nil) {
        self.label = label
        self.deliveryClass = deliveryClass
        self.medium = medium
        self.itemsPerWrite = itemsPerWrite
        controls = Locked(Controls(crash: crash))
    }

    var health: String? { controls.withLock { $0.failure ?? $0.notReady } }

    func waitUntilReady(timeout: Duration) -> String? {
        if let reason = controls.withLock({ $0.notReady }) {
            Thread.sleep(forTimeInterval: min(0.05, Double(timeout.components.seconds)))
            return reason
        }
        return nil
    }

    func deliver(_ items: [SinkItem], willWrite: (Int) throws -> Void, didWrite: (Int) -> Void) throws(SinkError) {
        var done = 0
        while done < items.count {
            let end = min(done + itemsPerWrite, items.count)
            if controls.withLock({ $0.crashed }) { throw SinkError(delivered: done, message: "dead") }
            if let failure = controls.withLock({ $0.failure }) {
                throw SinkError(delivered: done, message: failure)
            }
            if let held = controls.withLock({ $0.heldDevice }), held.device == items[done].device {
                throw SinkError(delivered: done, message: held.reason, scope: .session)
            }
            let turnUsedUp = controls.withLock { c -> Bool in
                guard let slow = c.slowDevice, slow.device == items[done].device else { return false }
                c.turnsUsed += 1
                return c.turnsUsed % slow.turns != 0
            }
            if turnUsedUp { throw SinkError(delivered: done, message: "turn used up", scope: .turnUsedUp) }
            do { try willWrite(end) } catch { throw SinkError(delivered: done, message: "\(error)") }
            let number = controls.withLock { c in
                c.writes += 1
                return c.writes
            }
            if controls.withLock({ $0.crash }) == .beforeWrite(number) { try freeze(delivered: done) }
            if controls.withLock({ $0.hold }) == number {
                holding.signal()
                resume.wait()
            }
            medium.written.withLock { $0 += items[done..<end] }
            if controls.withLock({ $0.crash }) == .afterWrite(number) { try freeze(delivered: done) }
            didWrite(end)
            done = end
        }
    }

    /// Class (c): the last seq of (device, session) in the medium.
    func position(device: DeviceID, session: String) -> UInt64? {
        guard deliveryClass == .ownPosition else { return nil }
        return medium.items.last { $0.device == device && $0.session == session }?.chunk.seq
    }

    func close() {}

    /// The process "dies" here: nothing after this point happens until the test, which has taken its snapshot of
    /// the disk, lets the frozen thread go.
    private func freeze(delivered: Int) throws(SinkError) {
        controls.withLock { $0.crashed = true }
        crashed.signal()
        release.wait()
        // The "dead" pipeline was stopped before the release; it writes nothing more.
        throw SinkError(delivered: delivered, message: "dead")
    }
}
