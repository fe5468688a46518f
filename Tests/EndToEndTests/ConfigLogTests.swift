#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeConfig
import SpeakBridgeProtocol
import Testing

/// Found by review (a stolen phone key): every config message a device sent wrote a line to the daemon's log
/// (2,000 pulls, 2,000 lines in a second): a log file without bound, or journald's rate limit dropping the lines
/// that matter. Now at most 10 calls' lines per device in 10 s; another device's are not hidden.
@Suite("End to end: config lines in the daemon's log are bounded per device", .serialized)
struct ConfigLogTests {
    func pull(_ batch: String) -> [(String, JSONValue)] {
        [("batch", .string(batch)), ("keys", .array([.string("ui.theme")]))]
    }

    @Test("60 pulls of one device log at most 10 calls' lines; another device's pull is logged")
    func aDevicesPullsAreLoggedAtMostTenTimes() throws {
        let pair = Pair()
        try pair.startDaemon(sinks: ["stdout"])
        defer { pair.stop() }
        let thief = try RawConfigSession(try RawPeer.paired(with: pair, name: "thief"), port: pair.port)
        defer { thief.close() }
        for i in 0..<60 {
            let answer = try thief.exchange("config-pull", pull("p\(i)"))
            #expect(answer.type == "config-offer", "\(answer)")
        }
        let tablet = try RawConfigSession(try RawPeer.paired(with: pair, name: "tablet"), port: pair.port)
        defer { tablet.close() }
        #expect(try tablet.exchange("config-pull", pull("t")).type == "config-offer")
        let daemon = try #require(pair.daemon)
        try Harness.wait("the tablet's pull in the log") { daemon.stderr.contains("to \"tablet\"") }
        let lines = daemon.stderr.split(separator: "\n")
        let thiefs = lines.filter { $0.contains("config: sending") && $0.contains("\"thief\"") }
        // The session's own first pull (RawConfigSession's hello) and 9 of the 60: 10 calls.
        #expect(thiefs.count == ConfigPeerHandler.logBurst, "\(thiefs.count) lines for the thief's 61 pulls")
        // The tablet's two (its session's first pull and this one) are all logged.
        #expect(lines.filter { $0.contains("config: sending") && $0.contains("\"tablet\"") }.count == 2)
    }
}
