#if canImport(Glibc)
import Glibc
#endif
import Foundation
@testable import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// The figures of issue 8, row 3, as a benchmark (not a test: it asserts nothing and is skipped unless
/// SPEAKBRIDGE_BENCH_FLOOD is set; `Tests/bench/flood.sh` runs it against a release daemon):
/// 1. one paired device sends 1 GB of chunks without reading acks, into a FIFO that is read at full speed;
/// 2. one paired device uses 100,000 distinct session IDs;
/// in both, another paired device sends one chunk every 10 ms and times its ack. Printed: daemon peak and final
/// RSS, the other device's ack p50/p99/max, and for (2) `status --json` and restart times.
@Suite("Benchmark: a paired device flooding the daemon", .serialized,
       .enabled(if: ProcessInfo.processInfo.environment["SPEAKBRIDGE_BENCH_FLOOD"] != nil))
struct FloodBench {
    static let floodBytes = Int(ProcessInfo.processInfo.environment["SPEAKBRIDGE_BENCH_FLOOD_MB"] ?? "1024")! << 20
    static let sessionCount = Int(ProcessInfo.processInfo.environment["SPEAKBRIDGE_BENCH_SESSIONS"] ?? "100000")!

    func pairOther(_ pair: Pair) throws -> String {
        let home = Harness.tempDir("bench-other")
        let out = try run(["join", try pair.pairCode(), "--name", "other"], home: home)
        guard out.status == 0 else { throw HarnessError("second join failed: \(out.stderr)") }
        return home
    }

    @Test func oneGigabyteFlood() throws {
        let pair = Pair()
        defer { pair.stop() }
        let fifo = pair.desktopHome + "/out"
        try pair.startDaemon(sinks: ["fifo:" + fifo])
        try pair.join()
        let otherHome = try pairOther(pair)
        defer { try? FileManager.default.removeItem(atPath: otherHome) }
        let pid = pair.daemon!.pid
        let drain = DiscardingReader(path: fifo)
        drain.start()
        defer { drain.stop() }
        // Baseline: the same probe for 5 s without the flood (fsync and scheduling on this machine right now).
        let idle = try AckProbe(home: otherHome, port: pair.port)
        idle.start()
        usleep(5_000_000)
        print("flood: other device ack without the flood (baseline) " + AckProbe.summary(idle.stop()))
        let probe = try AckProbe(home: otherHome, port: pair.port)
        probe.start()

        let flood = try DeviceSession(home: pair.phoneHome, port: pair.port)
        let text = String(repeating: "x", count: 1_000)
        let perFrame = 48
        let frames = Self.floodBytes / (perFrame * (text.utf8.count + 1))
        var seq: UInt64 = 0
        var peak = 0
        let started = Date()
        for frame in 0..<frames {
            var json = #"{"type":"chunks","session":"flood","chunks":["#
            for i in 0..<perFrame {
                seq += 1
                json += (i == 0 ? "" : ",") + #"{"seq":\#(seq),"text":"\#(text)","final":true}"#
            }
            json += "]}"
            flood.sendPlaintext(Array(json.utf8))
            // Keep this process's own send queue at most 32 MB ahead of what came out of the FIFO (the daemon is
            // pushed well past its limits: its hard limit is 16 MiB), under the 64 MiB a client connection may queue
            // (`WebSocketClientConfiguration.maxQueuedBytes`: past it the client closes, "not reading").
            while (frame + 1) * perFrame - drain.lines > (32 << 20) / (text.utf8.count + 1) { usleep(1_000) }
            if frame % 200 == 0 { peak = max(peak, ProcStatus.kilobytes("VmHWM", pid: pid) ?? 0) }
        }
        while drain.lines < frames * perFrame, Date().timeIntervalSince(started) < 600 { usleep(10_000) }
        let seconds = Date().timeIntervalSince(started)
        flood.close()
        let latencies = probe.stop()
        usleep(500_000)
        peak = max(peak, ProcStatus.kilobytes("VmHWM", pid: pid) ?? 0)
        let final = ProcStatus.kilobytes("VmRSS", pid: pid) ?? 0
        print(String(format: "flood: %d MiB in %.1f s (%.0f MiB/s) through the daemon; daemon RSS peak %d MiB, after %d MiB",
                     (frames * perFrame * (text.utf8.count + 1)) >> 20, seconds,
                     Double(frames * perFrame * (text.utf8.count + 1)) / 1_048_576 / seconds, peak >> 10, final >> 10))
        print("flood: other device ack " + AckProbe.summary(latencies))
    }

    @Test func hundredThousandSessions() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        let otherHome = try pairOther(pair)
        defer { try? FileManager.default.removeItem(atPath: otherHome) }
        let pid = pair.daemon!.pid
        let probe = try AckProbe(home: otherHome, port: pair.port)
        probe.start()

        var device = try DeviceSession(home: pair.phoneHome, port: pair.port)
        var acked = 0
        var refused = 0
        var peak = 0
        var sent = 0
        let started = Date()
        // As fast as the daemon answers, 40 at a time (4,160 admitted = 104 × 40: no group mixes acks and errors,
        // which leave from different threads and can still overtake each other: issue 8, row 12). A refused chunk
        // closes its connection (PROTOCOL.md, "Errors"), so past the bound each try is one new connection: 200 of
        // them stand for the rest of the 100,000.
        groups: for group in stride(from: 0, to: Self.sessionCount, by: 40) {
            let end = min(group + 40, Self.sessionCount)
            for i in group..<end { device.send(.chunk(session: "b-\(i)", Chunk(seq: 1, text: "b"))) }
            sent = end
            var answers = 0
            while answers < end - group {
                // The refusal's `error` may be lost: the chunks sent after the refused one lie unread when the
                // desktop closes, which makes the close a TCP reset (PROTOCOL.md, "Errors").
                guard let message = try? device.receive(timeout: 30) else { refused += 1; break groups }
                switch message {
                case .ack: acked += 1; answers += 1
                case .error: refused += 1; break groups
                default: break
                }
            }
            device.inbox.removeAll()
            if group % 4_000 == 0 { peak = max(peak, ProcStatus.kilobytes("VmHWM", pid: pid) ?? 0) }
        }
        device.close()
        for i in 0..<min(200, max(0, Self.sessionCount - sent)) {
            device = try DeviceSession(home: pair.phoneHome, port: pair.port)
            device.send(.chunk(session: "c-\(i)", Chunk(seq: 1, text: "c")))
            if case .error = try device.receive(timeout: 30) { refused += 1 }
            device.close()
        }
        peak = max(peak, ProcStatus.kilobytes("VmHWM", pid: pid) ?? 0)
        let seconds = Date().timeIntervalSince(started)
        let latencies = probe.stop()
        peak = max(peak, ProcStatus.kilobytes("VmHWM", pid: pid) ?? 0)
        let statusStart = Date()
        let status = try run(["status", "--json"], home: pair.desktopHome)
        let statusTime = Date().timeIntervalSince(statusStart)
        print(String(format: "sessions: %d session IDs in %.1f s: %d admitted, %d refused (too-many-sessions, each closing its connection); daemon RSS peak %d MiB",
                     acked + refused, seconds, acked, refused, peak >> 10))
        print("sessions: other device ack " + AckProbe.summary(latencies))
        print(String(format: "sessions: status --json %@ in %.3f s (%d bytes)", status.status == 0 ? "answered" : "FAILED",
                     statusTime, status.stdout.utf8.count))
        pair.daemon!.terminate()
        let restart = Date()
        try pair.startDaemon(sinks: ["stdout"])
        let restartTime = Date().timeIntervalSince(restart)
        let acks = try run(["send", "--text", "after restart"], home: otherHome)
        print(String(format: "sessions: restart to a working control socket %.2f s; other device after restart: %@",
                     restartTime, acks.status == 0 ? "acked" : "FAILED"))
    }
}

extension FloodBench {
    /// The same session IDs sent as fast as the socket takes them, answers never waited for. Since a refused chunk
    /// closes its connection, this ends at the first new session the device's bound refuses (the 65th, while the
    /// 64 live ones still wait for their acks): the rest is never read.
    @Test func hundredThousandSessionsUnpaced() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        let otherHome = try pairOther(pair)
        defer { try? FileManager.default.removeItem(atPath: otherHome) }
        let pid = pair.daemon!.pid
        let probe = try AckProbe(home: otherHome, port: pair.port)
        probe.start()
        let device = try DeviceSession(home: pair.phoneHome, port: pair.port)
        let started = Date()
        for i in 0..<Self.sessionCount {
            device.sendPlaintext(Array(#"{"type":"chunk","session":"u-\#(i)","seq":1,"text":"u","final":true}"#.utf8))
        }
        // Until the daemon answered every message (acks and errors arrive; nothing else is sent to it).
        var answers = 0
        while answers < Self.sessionCount, Date().timeIntervalSince(started) < 300 {
            guard let frame = try? device.link.next(timeout: 10) else { break }
            _ = frame
            answers += 1
        }
        let seconds = Date().timeIntervalSince(started)
        let latencies = probe.stop()
        let peak = ProcStatus.kilobytes("VmHWM", pid: pid) ?? 0
        let statusStart = Date()
        let status = try run(["status", "--json"], home: pair.desktopHome)
        print(String(format: "sessions unpaced: %d session IDs answered in %.1f s (%d answers); daemon RSS peak %d MiB; status --json %@ in %.3f s",
                     Self.sessionCount, seconds, answers, peak >> 10, status.status == 0 ? "answered" : "FAILED",
                     Date().timeIntervalSince(statusStart)))
        print("sessions unpaced: other device ack " + AckProbe.summary(latencies))
        device.close()
    }
}

/// Another paired device: one chunk every 10 ms on its own session, timing each ack.
final class AckProbe: @unchecked Sendable {
    // Sound: `session` is used only by the probe's thread until `stop` joined it; `samples`/`stopping` under `lock`.
    let session: DeviceSession
    let lock = NSLock()
    var samples: [Double] = []
    var stopping = false
    var thread: Thread?
    let done = DispatchSemaphore(value: 0)
    /// A fresh session ID per probe: a reused one would restart at seq 1 and be acked at once as duplicates.
    let name = "probe-\(UInt32.random(in: 0...UInt32.max))"

    init(home: String, port: Int) throws {
        session = try DeviceSession(home: home, port: port)
    }

    func start() {
        let t = Thread { [self] in
            var seq: UInt64 = 0
            while !lock.withLock({ stopping }) {
                seq += 1
                let sent = Date()
                session.send(.chunk(session: name, Chunk(seq: seq, text: "probe \(seq)")))
                let wanted = seq
                let got = try? session.receive(timeout: 30) { if case .ack(self.name, let s) = $0 { s >= wanted } else { false } }
                session.inbox.removeAll()
                if got == nil { break }
                lock.withLock { samples.append(Date().timeIntervalSince(sent) * 1_000) }
                usleep(10_000)
            }
            done.signal()
        }
        thread = t
        t.start()
    }

    /// Stops the probe; its latencies in ms.
    func stop() -> [Double] {
        lock.withLock { stopping = true }
        done.wait()
        session.close()
        return lock.withLock { samples }
    }

    static func summary(_ values: [Double]) -> String {
        guard !values.isEmpty else { return "no samples" }
        let v = values.sorted()
        func p(_ q: Double) -> Double { v[min(v.count - 1, Int((q * Double(v.count - 1)).rounded()))] }
        return String(format: "n=%d p50 %.2f ms, p99 %.2f ms, max %.2f ms", v.count, p(0.5), p(0.99), v.last!)
    }
}

/// Reads a FIFO as fast as it can and counts lines, keeping nothing.
final class DiscardingReader: @unchecked Sendable {
    // Sound: `count` and `stopRequested` are only touched under `lock`.
    let path: String
    let lock = NSLock()
    var count = 0
    var stopRequested = false
    let done = DispatchSemaphore(value: 0)

    init(path: String) { self.path = path }

    var lines: Int { lock.withLock { count } }

    func start() {
        Thread { [self] in
            let fd = open(path, O_RDONLY)
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while fd >= 0, !lock.withLock({ stopRequested }) {
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&pfd, 1, 100) > 0 else { continue }
                let n = read(fd, &buffer, buffer.count)
                if n <= 0 { usleep(1_000); continue }
                var newlines = 0
                buffer.withUnsafeBytes { bytes in
                    var p = bytes.baseAddress!
                    let end = p + n
                    while p < end, let hit = memchr(p, 0x0A, end - p) {
                        newlines += 1
                        p = UnsafeRawPointer(hit) + 1
                    }
                }
                lock.withLock { count += newlines }
            }
            if fd >= 0 { close(fd) }
            done.signal()
        }.start()
    }

    func stop() {
        lock.withLock { stopRequested = true }
        done.wait()
    }
}
