#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeProtocol

/// The desktop's durable delivery progress: for each (sink, device, session), the last sequence number that sink
/// has been handed. An append-only log of JSON lines `["sink","DEVICE-ID","session",seq]`, compacted on open and
/// when it grows large. `record` is one write(2) (survives the process being killed at once); `sync` is the
/// fsync that makes everything recorded so far survive a power cut, and the desktop acks only after it.
public final class ProgressLog: @unchecked Sendable {
    public struct Key: Hashable, Sendable {
        public var sink: String
        public var device: DeviceID
        public var session: String
    }

    let path: String
    let lock = NSLock()
    var fd: Int32
    var latest: [Key: UInt64] = [:]
    var appendedBytes = 0
    static let compactAfterBytes = 8 << 20

    public init(path: String) throws(StoreError) {
        self.path = path
        latest = try Self.load(path)
        try FileIO.atomicWrite(path, Self.snapshot(latest))
        fd = try FileIO.openAppend(path)
    }

    deinit { close(fd) }

    public func progress(sink: String, device: DeviceID, session: String) -> UInt64? {
        lock.withLock { latest[Key(sink: sink, device: device, session: session)] }
    }

    /// Every (device, session) with any recorded progress, with the per-sink values.
    public func entries() -> [Key: UInt64] { lock.withLock { latest } }

    public func record(sink: String, device: DeviceID, session: String, seq: UInt64) throws(StoreError) {
        let key = Key(sink: sink, device: device, session: session)
        let line = Self.line(key, seq)
        lock.lock()
        defer { lock.unlock() }
        try FileIO.writeAll(fd, line, path: path)
        appendedBytes += line.count
        latest[key] = seq
    }

    /// Makes every record so far durable; compacts the log when it has grown. The fsync runs on a duplicate of
    /// the descriptor without holding the lock, so sinks keep recording (and writing) while the disk catches up.
    public func sync() throws(StoreError) {
        lock.lock()
        if appendedBytes > Self.compactAfterBytes {
            defer { lock.unlock() }
            try FileIO.atomicWrite(path, Self.snapshot(latest))
            close(fd)
            fd = try FileIO.openAppend(path)
            appendedBytes = 0
            return
        }
        let handle = dup(fd)
        lock.unlock()
        guard handle >= 0 else { throw .io("sync", path, errno: errno) }
        defer { close(handle) }
        guard fsync(handle) == 0 else { throw .io("sync", path, errno: errno) }
    }

    /// Forgets a device (after revocation).
    public func forget(device: DeviceID) throws(StoreError) {
        lock.lock()
        defer { lock.unlock() }
        latest = latest.filter { $0.key.device != device }
        try FileIO.atomicWrite(path, Self.snapshot(latest))
        close(fd)
        fd = try FileIO.openAppend(path)
        appendedBytes = 0
    }

    static func line(_ key: Key, _ seq: UInt64) -> [UInt8] {
        JSONValue.array([.string(key.sink), .string(key.device.description), .string(key.session), .integer(Int64(seq))])
            .encoded() + [0x0A]
    }

    static func snapshot(_ latest: [Key: UInt64]) -> [UInt8] {
        var out: [UInt8] = []
        for (key, seq) in latest.sorted(by: { "\($0.key)" < "\($1.key)" }) { out += line(key, seq) }
        return out
    }

    static func load(_ path: String) throws(StoreError) -> [Key: UInt64] {
        guard let bytes = try FileIO.read(path) else { return [:] }
        var latest: [Key: UInt64] = [:]
        // A torn last line (killed mid-write) is ignored: it was never acknowledged.
        for line in bytes.split(separator: 0x0A) {
            guard let v = try? JSONValue.parse(Array(line)), let a = v.arrayValue, a.count == 4,
                  let sink = a[0].stringValue, let dev = a[1].stringValue.flatMap({ try? DeviceID(parsing: $0) }),
                  let session = a[2].stringValue, let seq = a[3].int64Value, seq >= 0 else { continue }
            let key = Key(sink: sink, device: dev, session: session)
            latest[key] = max(latest[key] ?? 0, UInt64(seq))
        }
        return latest
    }
}
