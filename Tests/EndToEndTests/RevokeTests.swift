#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// `devices revoke` against the real daemon while a sink still holds a backlog of the device.
@Suite("End to end: revoking a device", .serialized)
struct RevokeTests {
    func queued(_ pair: Pair) -> Int64 {
        (try? pair.status())?["sinks"]?.arrayValue?.first?["queued"]?.int64Value ?? -1
    }

    /// A FIFO whose reader stops reading: the pipe fills (64 KiB) and the rest of the device's lines wait in the
    /// daemon's queue. Revoking the device drops them: once the reader reads again it gets what the pipe held and
    /// nothing more. Before, the daemon went on writing every queued line of the revoked device (with a typing
    /// sink: typing it, for minutes).
    @Test("revoking a device drops what the sinks still queue of it: nothing more of it reaches the FIFO")
    func revokeDropsTheQueuedLines() throws {
        let pair = Pair()
        defer { pair.stop() }
        let fifo = pair.desktopHome + "/out"
        try pair.startDaemon(sinks: ["fifo:" + fifo])
        try pair.join()
        // Open for reading (so the sink has a reader) and read nothing yet.
        let fd = open(fifo, O_RDONLY | O_NONBLOCK)
        try #require(fd >= 0)
        defer { close(fd) }
        let filler = String(repeating: "x", count: 200)
        let lines = (1...1_500).map { "line \($0) \(filler)" }  // about 310 KB: the pipe takes about a fifth
        let sender = try pair.sendLines(lines)
        defer { sender.kill9() }
        try Harness.wait("the daemon to queue most of the lines behind the full pipe", timeout: 60) {
            queued(pair) >= 1_000
        }
        let id = try Identity.loadOrCreate(Home.resolve(override: pair.phoneHome)).deviceID
        let revoke = try run(["devices", "revoke", id.description], home: pair.desktopHome)
        #expect(revoke.status == 0, "\(revoke.stderr)")
        // The revocation reaches the pipeline just after the reply; a sink waiting for room in the pipe drops the
        // device's lines when that wait ends (at most a second).
        try Harness.wait("the queued lines to be dropped", timeout: 10) { queued(pair) == 0 }
        // Read everything there is now, and a while longer: nothing more may come.
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var quietSince = Date()
        while Date().timeIntervalSince(quietSince) < 1.5 {
            let n = read(fd, &buffer, buffer.count)
            if n > 0 {
                received += buffer[0..<n]
                quietSince = Date()
            } else {
                usleep(20_000)
            }
        }
        let count = received.split(separator: 0x0A).count
        // The pipe's 64 KiB (about 310 lines), plus at most one write of 4096 bytes under way at the revocation.
        #expect(count > 0 && count <= 340, "\(count) of 1,500 lines reached the FIFO after the revocation")
        #expect(queued(pair) == 0)
        print("revoke with 1,500 lines sent: \(count) reached the FIFO (what the pipe held)")
    }
}
