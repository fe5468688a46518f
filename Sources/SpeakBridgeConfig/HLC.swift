import SpeakBridgeProtocol

/// The version of one key: a hybrid logical clock reading plus the ID of the device that wrote it.
///
/// Text form (in files and on the wire): `MS:COUNTER:DEVICE`, e.g. `1718031234567:0:7RQ4K2M9XW3D8HNP` —
/// `MS` wall-clock milliseconds since the Unix epoch (decimal, no leading zeros, < 2^48), `COUNTER` 0–65535
/// (decimal, no leading zeros), `DEVICE` the writer's device ID in its 16-symbol compact form. One text form
/// per version, so versions can be compared as values and written back unchanged.
///
/// Order: by `ms`, then `counter`, then the device ID's bytes. The last rule makes merges deterministic:
/// two devices that write the same key in the same millisecond still agree on one winner.
public struct HLCTimestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    public static let maxMillis: UInt64 = (1 << 48) - 1

    public var ms: UInt64
    public var counter: UInt16
    public var device: DeviceID

    public init(ms: UInt64, counter: UInt16, device: DeviceID) {
        self.ms = ms
        self.counter = counter
        self.device = device
    }

    public init(parsing text: String) throws(ConfigError) {
        let bad = ConfigError(.malformed, "malformed version \"\(ConfigKey.printable(text))\" (expected MS:COUNTER:DEVICE)")
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, text.utf8.count <= 40,
              let ms = Self.decimal(parts[0]), ms <= Self.maxMillis,
              let counter = Self.decimal(parts[1]), counter <= UInt64(UInt16.max),
              let device = try? DeviceID(parsing: String(parts[2])), device.compact == parts[2]
        else { throw bad }
        self.init(ms: ms, counter: UInt16(counter), device: device)
    }

    /// Digits only, no sign, no leading zeros (one text form per number).
    static func decimal(_ s: Substring) -> UInt64? {
        guard !s.isEmpty, s.utf8.count <= 15, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        guard s == "0" || s.first != "0" else { return nil }
        return UInt64(s)
    }

    public var description: String { "\(ms):\(counter):\(device.compact)" }

    public static func < (a: HLCTimestamp, b: HLCTimestamp) -> Bool {
        if a.ms != b.ms { return a.ms < b.ms }
        if a.counter != b.counter { return a.counter < b.counter }
        return a.device.bytes.lexicographicallyPrecedes(b.device.bytes)
    }
}

/// The clock of one installation (Kulkarni et al., "Logical Physical Clocks", 2014): `ms` never runs behind the
/// wall clock for long, never goes backwards, and every version this installation writes is greater than every
/// version it has seen. Persisted in `settings.json`, so it survives restarts and a wall clock set back.
public struct HybridLogicalClock: Sendable, Equatable {
    /// A version more than this far ahead of our wall clock is refused: it would win every later merge.
    public static let maxForwardSkewMillis: UInt64 = 5 * 60 * 1_000

    public var ms: UInt64
    public var counter: UInt16

    public init(ms: UInt64 = 0, counter: UInt16 = 0) {
        self.ms = ms
        self.counter = counter
    }

    /// A new version for a local write at wall-clock time `now` (ms).
    public mutating func tick(now: UInt64, device: DeviceID) -> HLCTimestamp {
        if now > ms {
            ms = now
            counter = 0
        } else {
            advanceCounter(from: counter)
        }
        return HLCTimestamp(ms: ms, counter: counter, device: device)
    }

    /// Takes a version received from a peer into account, so later local writes are newer than it.
    /// The caller has already checked it against `check(_:now:)`.
    public mutating func observe(_ remote: HLCTimestamp, now: UInt64) {
        let top = max(ms, remote.ms, now)
        if top == ms && top == remote.ms {
            advanceCounter(from: max(counter, remote.counter))
        } else if top == ms {
            advanceCounter(from: counter)
        } else if top == remote.ms {
            ms = top
            advanceCounter(from: remote.counter)
        } else {
            ms = top
            counter = 0
        }
    }

    /// Refuses a remote version too far ahead of `now`.
    public static func check(_ remote: HLCTimestamp, now: UInt64, key: String) throws(ConfigError) {
        guard remote.ms <= now + maxForwardSkewMillis else {
            let ahead = (remote.ms - now) / 1_000
            throw ConfigError(.clock, "the version of \(key) is \(ahead) s in the future (limit \(maxForwardSkewMillis / 1_000) s)",
                              hint: "check the clock of device \(remote.device)")
        }
    }

    /// counter + 1; on overflow the clock moves one millisecond ahead instead (still monotonic).
    mutating func advanceCounter(from base: UInt16) {
        if base == UInt16.max {
            ms += 1
            counter = 0
        } else {
            counter = base + 1
        }
    }
}
