#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeSupport

/// Connections to the control socket that the server refused because the process behind them runs as another
/// user: the log line for each, at most one in `interval` seconds. The next line shown says how many were refused
/// meanwhile without one. The other user decides how often to connect, and every line is a write to the terminal
/// or the journal. A value; the server keeps it under its lock.
struct ControlRefusals: Sendable {
    static let interval: UInt64 = 10_000_000_000  // nanoseconds of CLOCK_MONOTONIC

    private var budget = LogBudget<Int>(interval: Double(interval) / 1e9, burst: 1)

    /// Nil when a line was logged less than `interval` before `now` (nanoseconds): this refusal is counted
    /// instead. Otherwise the line may be logged, and this is how many refusals went unlogged before it.
    mutating func admit(now: UInt64) -> Int? {
        budget.admit(0, now: Double(now) / 1e9)
    }

    /// The line for a refused peer (`credentials` nil: SO_PEERCRED failed with `error`): its uid and pid, and its
    /// command name (`/proc/PID/comm`, which that user chose: escaped, at most 16 bytes by the kernel's rule).
    static func line(path: String, credentials: (pid: Int32, uid: uid_t)?, error: Int32, unlogged: Int) -> String {
        let more = unlogged == 0 ? "" : " (and \(unlogged) more refused since the last such line)"
        guard let credentials else {
            return "control socket \(path): refused a connection whose process cannot be identified "
                + "(SO_PEERCRED: \(String(cString: strerror(error))))" + more
        }
        let name = command(of: credentials.pid).map { ", \"\(PeerText.escape($0, limit: 16))\"" } ?? ""
        return "control socket \(path): refused a connection from uid \(credentials.uid) (pid \(credentials.pid)\(name)): "
            + "only \(geteuid() == 0 ? "root" : "uid \(geteuid()) and root") may use it; check who can enter "
            + ControlClient.directory(of: path) + more
    }

    /// The process's name as the kernel keeps it, nil when it is gone or unreadable.
    static func command(of pid: Int32) -> String? {
        let fd = open("/proc/\(pid)/comm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 64)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        var name = bytes[..<count]
        if name.last == 0x0A { name = name.dropLast() }
        return String(decoding: name, as: UTF8.self)
    }
}
