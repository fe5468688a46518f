#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
@testable import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeDelivery
import SpeakBridgeWebSocket
import Testing

/// A paired but hostile device against the real daemon: it must not be able to bloat it (issue 8, row 3).
@Suite("End to end: a paired device cannot bloat the daemon", .serialized)
struct BoundsTests {
    /// Pairs a second device (its own home) with the pair's desktop.
    func pairOther(_ pair: Pair) throws -> String {
        let home = Harness.tempDir("other")
        let out = try run(["join", try pair.pairCode(), "--name", "other"], home: home)
        guard out.status == 0 else { throw HarnessError("second join failed: \(out.stderr)") }
        return home
    }

    @Test("48 MB of chunks from a paired device that never reads acks, into a FIFO nobody reads: daemon RSS stays under 64 MiB; another device's line gets through once the FIFO is read")
    func floodIsPausedAndBounded() throws {
        let pair = Pair()
        defer { pair.stop() }
        let fifo = pair.desktopHome + "/out"
        try pair.startDaemon(sinks: ["fifo:" + fifo])
        try pair.join()
        let other = try pairOther(pair)
        defer { try? FileManager.default.removeItem(atPath: other) }
        let pid = pair.daemon!.pid

        let flood = try DeviceSession(home: pair.phoneHome, port: pair.port)
        defer { flood.close() }
        // Plaintexts are built by hand (the codec's encoder is slow in a debug build): 1,000 frames × 48 chunks
        // × 1,000 bytes = 48 MB.
        let text = String(repeating: "x", count: 1_000)
        var seq: UInt64 = 0
        for _ in 0..<1_000 {
            var json = #"{"type":"chunks","session":"flood","chunks":["#
            for i in 0..<48 {
                seq += 1
                json += (i == 0 ? "" : ",") + #"{"seq":\#(seq),"text":"\#(text)","final":true}"#
            }
            json += "]}"
            flood.sendPlaintext(Array(json.utf8))
        }
        // Watch the daemon's peak RSS until it stops growing for a second (it stopped reading) or crosses the bound
        // (the old daemon read everything into its queues).
        var peak = 0
        var lastGrowth = Date()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, peak < 64 << 10, Date().timeIntervalSince(lastGrowth) < 1.5 {
            usleep(100_000)
            let now = ProcStatus.kilobytes("VmHWM", pid: pid) ?? 0
            if now > peak + 256 { lastGrowth = Date() }
            peak = max(peak, now)
        }
        print("flood: daemon peak RSS \(peak / 1024) MiB")
        #expect(peak > 0)
        // Under a sanitizer (make sanitize) the daemon's RSS includes shadow memory: the bound is not about that.
        if ProcessInfo.processInfo.environment["SPEAKBRIDGE_SANITIZER"] == nil {
            #expect(peak < 64 << 10, "daemon peak RSS \(peak / 1024) MiB with an unread FIFO and a 48 MB flood")
        }

        // The other device's line waits behind the bounded backlog; once the FIFO is read it gets through, acked.
        let sender = try Proc(["send", "--text", "other device line", "--timeout", "60"], home: other, label: "other-send")
        let reader = FifoReader(path: fifo)
        reader.start()
        defer { reader.stop() }
        let t0 = Date()
        defer { print("flood: other line after \(Date().timeIntervalSince(t0)) s, \(reader.count) lines read") }
        try Harness.wait("the other device's line in the FIFO", timeout: 60) {
            reader.snapshot.contains("other device line")
        }
        #expect(try sender.wait(timeout: 60).status == 0)
    }

    @Test("4,200 session IDs from one device: at most 64 live, 4,160 admitted then too-many-sessions (and closed); a retired session is never delivered twice; status answers; restart keeps it; another device gets acks")
    func manySessionsStayBounded() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        let other = try pairOther(pair)
        defer { try? FileManager.default.removeItem(atPath: other) }

        var device = try DeviceSession(home: pair.phoneHome, port: pair.port)
        defer { device.close() }
        var acked = 0
        var refused: [String] = []
        // Groups of 40 (< 64 live): the older sessions are acked, so retirement always finds one; 4,160 = 104 × 40,
        // so no group mixes acks with refusals (acks and error replies leave from different threads, and frames
        // from two threads can still overtake each other: issue 8, row 12).
        for group in stride(from: 0, to: 4_160, by: 40) {
            for i in group..<(group + 40) { device.send(.chunk(session: "m-\(i)", Chunk(seq: 1, text: "m-\(i)"))) }
            var answers = 0
            while answers < 40 {
                switch try device.receive() {
                case .ack: acked += 1; answers += 1
                case let .error(_, message, _): refused.append(message); answers += 1
                default: break
                }
            }
        }
        #expect(acked == 64 + 4_096)
        #expect(refused.isEmpty)
        // Now the device has used all it may: every further new session is refused, nothing of it is accepted,
        // and the connection is closed after the error (so that no later ack on it could cover the refused chunk).
        device.send(.chunk(session: "m-4160", Chunk(seq: 1, text: "m-4160")))
        let answer = try device.receive()
        guard case let .error(code, _, _) = answer else { Issue.record("m-4160: \(answer)"); return }
        #expect(code == .tooManySessions)
        try device.link.waitClosed(timeout: 10)
        device.close()
        for i in 4_161..<4_164 {
            let next = try DeviceSession(home: pair.phoneHome, port: pair.port)
            defer { next.close() }
            next.send(.chunk(session: "m-\(i)", Chunk(seq: 1, text: "m-\(i)")))
            guard case let .error(code, _, _) = try next.receive() else { Issue.record("m-\(i) not refused"); break }
            #expect(code == .tooManySessions)
            try next.link.waitClosed(timeout: 10)
        }
        device = try DeviceSession(home: pair.phoneHome, port: pair.port)

        let status = try run(["status", "--json"], home: pair.desktopHome, timeout: 10)
        #expect(status.status == 0)
        #expect(status.stdout.components(separatedBy: "\"session\":").count - 1 <= 64)

        // m-0 was retired long ago. The client resumes it: told its level; the resent chunk is not written again.
        device.send(.resume(session: "m-0", delivered: nil))
        #expect(try device.receive { if case .resume("m-0", _) = $0 { true } else { false } } == .resume(session: "m-0", delivered: 1))
        device.send(.chunk(session: "m-0", Chunk(seq: 1, text: "m-0")))
        #expect(try device.receive { if case .ack("m-0", _) = $0 { true } else { false } } == .ack(session: "m-0", seq: 1))
        device.send(.chunk(session: "m-0", Chunk(seq: 2, text: "m-0 again")))
        #expect(try device.receive { if case .ack("m-0", _) = $0 { true } else { false } } == .ack(session: "m-0", seq: 2))
        // A refused session left nothing: resume says 0, and its chunk never reached the sink.
        device.send(.resume(session: "m-4163", delivered: nil))
        #expect(try device.receive { if case .resume("m-4163", _) = $0 { true } else { false } } == .resume(session: "m-4163", delivered: 0))

        #expect(try run(["send", "--text", "other device line"], home: other, timeout: 30).status == 0)
        device.close()
        let lines = pair.daemon!.stdout.split(separator: "\n")
        let first = lines.filter { $0 == "m-0" }.count
        let second = lines.filter { $0 == "m-0 again" }.count
        let refusedWritten = (4_160..<4_164).contains { lines.contains(Substring("m-\($0)")) }
        let otherWritten = lines.contains("other device line")
        #expect(first == 1)
        #expect(second == 1)
        #expect(!refusedWritten)
        #expect(otherWritten)

        // Restart: the retired table is loaded again (bounded file), everything still answers.
        pair.daemon!.terminate()
        let started = Date()
        try pair.startDaemon(sinks: ["stdout"])
        print("restart with 4,160 sessions of one device: \(String(format: "%.2f", Date().timeIntervalSince(started))) s")
        let logLines = try #require(try FileIO.read(pair.desktopHome + "/state/progress.log")).split(separator: 0x0A).count
        #expect(logLines <= 64 + 4_096 + 4)
        let again = try DeviceSession(home: pair.phoneHome, port: pair.port)
        defer { again.close() }
        again.send(.resume(session: "m-0", delivered: nil))
        #expect(try again.receive { if case .resume("m-0", _) = $0 { true } else { false } } == .resume(session: "m-0", delivered: 2))
        #expect(try run(["send", "--text", "after restart"], home: other, timeout: 30).status == 0)
    }
}

extension BoundsTests {
    @Test("revoking a device drops its delivery progress from the daemon's state (durably)")
    func revokeDropsProgress() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        #expect(try pair.send(["before revoke"]).status == 0)
        let id = try Identity.loadOrCreate(Home.resolve(override: pair.phoneHome)).deviceID
        let revoke = try run(["devices", "revoke", id.description], home: pair.desktopHome)
        #expect(revoke.status == 0, "\(revoke.stderr)")
        pair.daemon!.terminate()
        let log = try ProgressLog(path: pair.desktopHome + "/state/progress.log")
        let left = log.entries().keys.filter { $0.device == id }.count
        #expect(left == 0)
        #expect(log.retiredEntries()[id] == nil)
    }
}

/// An authenticated session with a paired device's own key and psk, driven message by message by a test.
final class DeviceSession {
    let link: RawLink
    var machine: InitiatorMachine
    var inbox: [Message] = []

    init(home path: String, port: Int) throws {
        let home = Home.resolve(override: path)
        let identity = try Identity.loadOrCreate(home)
        let desktop = try #require(try PeerStore(home: home).all.first)
        link = try RawLink(port: port, path: ConnectionIntent.session.path)
        machine = try InitiatorMachine(intent: .session, localStatic: identity.privateKey, desktopKey: desktop.publicKey,
                                       psk: desktop.psk, firstMessage: .hello(agent: "bounds-test"))
        link.send(try machine.start())
        let established = machine.receive(try link.next()).contains { if case .established = $0 { true } else { false } }
        guard established else { throw HarnessError("session not established") }
    }

    func send(_ message: Message) {
        for action in machine.encryptAndSend(message) {
            if case .send(let frame) = action { link.send(frame) }
        }
    }

    /// Encrypts and sends a plaintext built by the caller.
    func sendPlaintext(_ bytes: [UInt8]) {
        guard case .established = machine.state, let frame = try? machine.session?.encrypt(bytes) else { return }
        link.send(frame)
    }

    /// The next message (that matches `where`; others are skipped).
    func receive(timeout: Double = 10, where match: (Message) -> Bool = { _ in true }) throws -> Message {
        while true {
            if let index = inbox.firstIndex(where: match) { return inbox.remove(at: index) }
            for action in machine.receive(try link.next(timeout: timeout)) {
                if case .received(let m) = action { inbox.append(m) }
            }
        }
    }

    func close() { link.close() }
}

enum ProcStatus {
    /// A `kB` field of /proc/PID/status (VmRSS, VmHWM), in KiB.
    static func kilobytes(_ field: String, pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            return Int(line.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        }
        return nil
    }
}
