/// When `send` dials again after a lost connection or a failed round: a value, no clock (times come in).
///
/// A desktop that restarts (an upgrade, a crash, a reboot's fast part) is back within seconds, and the user feels
/// every moment between its listening and the next line arriving. Dialing a closed port on loopback or a LAN costs
/// one SYN and one RST, so while someone is active (the connection was lost, or a line was read, less than
/// `fastWindow` ago) the delay is capped at `fastCap`: at most ~3.3 dials a second, beside the shell's 20 ticks.
/// After that the delay doubles to `slowCap`, so a phone whose desktop is off for the night dials every few
/// seconds, not several times a second. Each delay is multiplied by 0.75–1 (jitter from `seed`): a hundred
/// devices that lost the same desktop do not all dial it in the same instant.
public struct RedialSchedule: Sendable {
    /// The first delay after a connection was up.
    public static let initial = 0.2
    /// The longest delay while someone is active.
    public static let fastCap = 0.3
    /// The longest delay otherwise.
    public static let slowCap = 5.0
    /// Seconds after a loss or a line read during which `fastCap` holds.
    public static let fastWindow = 60.0
    /// The shortest jitter factor (the longest is 1).
    public static let minJitter = 0.75

    var delay = RedialSchedule.initial
    var fastUntil: Double
    var state: UInt64

    public init(seed: UInt64, now: Double) {
        state = seed
        fastUntil = now + Self.fastWindow
    }

    /// A connection is up: the next loss starts from `initial` again.
    public mutating func reset() { delay = Self.initial }

    /// The connection was lost or a line was read: the fast pace holds for `fastWindow` from now.
    public mutating func active(now: Double) { fastUntil = max(fastUntil, now + Self.fastWindow) }

    /// The delay before the next dial (jittered); the one after it doubles up to the cap in force.
    public mutating func next(now: Double) -> Double {
        let cap = now < fastUntil ? Self.fastCap : Self.slowCap
        let d = min(delay, cap)
        delay = min(delay * 2, Self.slowCap)
        return d * jitter()
    }

    /// The latest a redial may wait once someone is active again (a line was read while waiting).
    public mutating func soonest(now: Double) -> Double { now + min(delay, Self.fastCap) * jitter() }

    /// A factor in [minJitter, 1] (SplitMix64: a few operations, no system call).
    mutating func jitter() -> Double {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        let unit = Double(z >> 11) / Double(UInt64(1) << 53)  // [0, 1)
        return Self.minJitter + (1 - Self.minJitter) * unit
    }
}
