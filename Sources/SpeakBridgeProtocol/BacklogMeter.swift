/// The desktop's backpressure rule, as a value: per device, how many chunks (and text bytes) were handed to the
/// sinks but not yet taken by every sink, and when that device's connections must stop or may resume reading.
///
/// - `submit` counts a message's accepted chunks. Above the high-water mark (chunks OR bytes) the device is
///   *throttled*: the caller stops reading its connections (WebSocket rx flow control), so the peer's further
///   frames wait in its own TCP buffers, not in this process.
/// - `taken` counts what one sink took. When a throttled device falls to the low-water mark (chunks AND bytes)
///   it is reported once as drained; the caller resumes reading.
/// - `isOverflowing`: at or above the hard limit, a message is not even accepted (the caller closes that
///   connection; the client resends after its reconnect). This bounds what frames already read before the pause
///   took effect can add, however many connections the device opens.
/// All arithmetic saturates: counts come from this process, but they must never trap.
public struct BacklogMeter: Sendable {
    public struct Limits: Sendable, Equatable {
        public var highChunks: UInt64
        public var highBytes: UInt64
        public var lowChunks: UInt64
        public var lowBytes: UInt64
        public var hardChunks: UInt64
        public var hardBytes: UInt64

        public init(highChunks: UInt64, highBytes: UInt64, lowChunks: UInt64, lowBytes: UInt64,
                    hardChunks: UInt64, hardBytes: UInt64) {
            self.highChunks = highChunks
            self.highBytes = highBytes
            self.lowChunks = lowChunks
            self.lowBytes = lowBytes
            self.hardChunks = hardChunks
            self.hardBytes = hardBytes
        }

        /// Reference desktop: pause above 2,048 chunks or 4 MiB, resume at 512 chunks and 1 MiB, refuse above
        /// 8,192 chunks or 16 MiB (a client's 4,096 chunks in flight fit under the hard limit).
        public static let desktop = Limits(highChunks: 2_048, highBytes: 4 << 20, lowChunks: 512, lowBytes: 1 << 20,
                                           hardChunks: 8_192, hardBytes: 16 << 20)
    }

    public struct Level: Sendable, Equatable {
        public var chunks: UInt64 = 0
        public var bytes: UInt64 = 0
        public init(chunks: UInt64 = 0, bytes: UInt64 = 0) {
            self.chunks = chunks
            self.bytes = bytes
        }
    }

    public enum Pressure: Sendable, Equatable {
        case normal
        /// Over the high-water mark: stop reading this device's connections.
        case pause
    }

    /// One device's cumulative counts: handed to the sinks, and taken per sink index. One dictionary entry, so
    /// a submit or a sink's report hashes the device once.
    struct Counts: Sendable {
        var submitted = Level()
        var taken: [Level]

        func undelivered(sinks: Int) -> Level {
            var minChunks = UInt64.max
            var minBytes = UInt64.max
            for i in 0..<sinks {
                let level = i < taken.count ? taken[i] : Level()
                minChunks = min(minChunks, level.chunks)
                minBytes = min(minBytes, level.bytes)
            }
            return Level(chunks: submitted.chunks &- min(submitted.chunks, minChunks),
                         bytes: submitted.bytes &- min(submitted.bytes, minBytes))
        }
    }

    public let limits: Limits
    let sinks: Int
    /// Each device's counts, at the slot `slots` gives it (a device is never removed: slots stay valid).
    var counts: [Counts] = []
    var slots: [DeviceID: Int] = [:]
    /// The device of the last `submit` or `taken`, and its slot: the next call for the same device (every call,
    /// with one device streaming) compares the ID instead of hashing it (a dictionary lookup by `DeviceID` cost
    /// about 270 instructions, two per line).
    var last: (device: DeviceID, slot: Int)?
    var throttled: Set<DeviceID> = []
    /// How many devices are at or above the hard limit now (kept by `submit` and `taken`): while it is 0 (and
    /// an empty backlog is under the limit, `mayOverflow`), no device is overflowing and a caller can say so
    /// without asking per device.
    public private(set) var overflowingDevices = 0

    /// False only when `isOverflowing` is false for every device.
    public var mayOverflow: Bool { overflowingDevices > 0 || isOver(Level()) }

    func isOver(_ u: Level) -> Bool { u.chunks >= limits.hardChunks || u.bytes >= limits.hardBytes }

    /// Counts `device`'s crossing of the hard limit, from its backlog before and after a change.
    mutating func recount(before: Level, after: Level) {
        let (was, now) = (isOver(before), isOver(after))
        if was != now { overflowingDevices += now ? 1 : -1 }
    }

    public init(sinks: Int, limits: Limits = .desktop) {
        self.sinks = max(0, sinks)
        self.limits = limits
    }

    /// Handed to the sinks, not yet taken by every sink.
    public func undelivered(_ device: DeviceID) -> Level {
        guard sinks > 0 else { return Level() }  // nothing can take chunks: nothing waits for a sink either
        return slots[device].map { counts[$0].undelivered(sinks: sinks) } ?? Level()
    }

    public func isThrottled(_ device: DeviceID) -> Bool { !throttled.isEmpty && throttled.contains(device) }

    public func isOverflowing(_ device: DeviceID) -> Bool { isOver(undelivered(device)) }

    public mutating func submit(_ device: DeviceID, chunks: UInt64, bytes: UInt64) -> Pressure {
        let sinks = self.sinks
        // In place in the array (no copy of the per-sink array; a new device's counts are made only once).
        let at = slot(device)
        let (before, u) = Self.submit(&counts[at], chunks: chunks, bytes: bytes, sinks: sinks)
        recount(before: before, after: u)
        guard u.chunks > limits.highChunks || u.bytes > limits.highBytes else { return .normal }
        throttled.insert(device)
        return .pause
    }

    /// Sink `sink` (0-based) took `chunks`/`bytes` of `device`. True when that drained a throttled device.
    public mutating func taken(_ device: DeviceID, sink: Int, chunks: UInt64, bytes: UInt64) -> Bool {
        guard sink >= 0, sink < sinks else { return false }
        let sinks = self.sinks
        let at = slot(device)
        let (before, u) = Self.take(&counts[at], sink: sink, chunks: chunks, bytes: bytes, sinks: sinks)
        recount(before: before, after: u)
        guard !throttled.isEmpty, throttled.contains(device) else { return false }
        guard u.chunks <= limits.lowChunks && u.bytes <= limits.lowBytes else { return false }
        throttled.remove(device)
        return true
    }

    /// A revoked device: its backlog is dropped (the sinks will not take it) and it is no longer throttled. Its
    /// slot stays (slots are never removed), with nothing in it.
    public mutating func forget(_ device: DeviceID) {
        throttled.remove(device)
        guard let at = slots[device] else { return }
        let before = sinks > 0 ? counts[at].undelivered(sinks: sinks) : Level()
        counts[at] = Counts(taken: Array(repeating: Level(), count: sinks))
        recount(before: before, after: Level())
    }

    /// `device`'s slot in `counts`, made (with nothing submitted or taken) for a device not seen before.
    mutating func slot(_ device: DeviceID) -> Int {
        if let last, last.device == device { return last.slot }
        let slot: Int
        if let known = slots[device] {
            slot = known
        } else {
            slot = counts.count
            counts.append(Counts(taken: Array(repeating: Level(), count: sinks)))
            slots[device] = slot
        }
        last = (device, slot)
        return slot
    }

    /// The device's backlog before and after.
    static func submit(_ counts: inout Counts, chunks: UInt64, bytes: UInt64, sinks: Int) -> (Level, Level) {
        guard sinks > 0 else {
            counts.submitted.chunks = add(counts.submitted.chunks, chunks)
            counts.submitted.bytes = add(counts.submitted.bytes, bytes)
            return (Level(), Level())
        }
        let before = counts.undelivered(sinks: sinks)
        counts.submitted.chunks = add(counts.submitted.chunks, chunks)
        counts.submitted.bytes = add(counts.submitted.bytes, bytes)
        return (before, counts.undelivered(sinks: sinks))
    }

    /// The device's backlog before and after.
    static func take(_ counts: inout Counts, sink: Int, chunks: UInt64, bytes: UInt64, sinks: Int) -> (Level, Level) {
        let before = counts.undelivered(sinks: sinks)
        counts.taken[sink].chunks = add(counts.taken[sink].chunks, chunks)
        counts.taken[sink].bytes = add(counts.taken[sink].bytes, bytes)
        return (before, counts.undelivered(sinks: sinks))
    }

    static func add(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? .max : sum
    }
}
