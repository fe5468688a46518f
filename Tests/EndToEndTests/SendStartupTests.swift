#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeStore
import Testing

/// What `send` does at start once it dials first (the notices come after the dial, off the first line's path) and
/// once it cuts a drained journal back at a clean exit: the same notices, the same lines, exactly once.
@Suite("send start-up: notices after the dial, the journal cut back at a clean exit", .serialized)
struct SendStartupTests {
    func journalSize(_ pair: Pair) -> Int {
        let dir = pair.phoneHome + "/state/outbox"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        guard let name = names.first(where: { $0.hasSuffix(".journal") }) else { return -1 }
        // Its records, without the zero padding after them (`LogFile`).
        return ((try? LogFile.readRecords(dir + "/" + name)) ?? nil)?.count ?? -1
    }

    @Test("held lines of an earlier pairing are still announced; the new line goes, the held ones do not")
    func heldNoticeAfterTheDial() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        let devices = try run(["devices", "--json"], home: pair.desktopHome).stdout
        let id = try #require(devices.range(of: #"[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}"#, options: .regularExpression))
        #expect(try run(["devices", "revoke", String(devices[id])], home: pair.desktopHome).status == 0)
        let refused = try Proc(["send", "--text", "old one", "--text", "old two"], home: pair.phoneHome, label: "refused")
        defer { refused.terminate() }
        #expect(try refused.wait(timeout: 15).status == 77)
        try pair.join()
        let out = try pair.send(["new"])
        #expect(out.status == 0, "\(out.stderr)")
        #expect(out.stderr.contains("2 line(s) from an earlier pairing with"), "no held notice: \(out.stderr)")
        try Harness.wait("the new line") { pair.daemon!.stdout == "new\n" }
    }

    @Test("a streaming send that ended with everything acknowledged leaves a short journal; the next one goes on")
    func drainedJournalIsShortAfterwards() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        let lines = (1...150).map { "streamed line \($0) with a few dictated words" }
        let first = try pair.sendLines(lines)
        #expect(try first.wait(timeout: 60).status == 0)
        #expect(journalSize(pair) >= 0 && journalSize(pair) < 200, "journal \(journalSize(pair)) bytes")
        #expect(try pair.send(["after"]).status == 0)
        try Harness.wait("every line once") { pair.daemon!.stdout.split(separator: "\n").count == 151 }
        #expect(pair.daemon!.stdout == (lines + ["after"]).joined(separator: "\n") + "\n")
    }
}
