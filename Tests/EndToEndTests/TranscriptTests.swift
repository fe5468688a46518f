#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeProtocol
import Testing

/// The sinks that hold their position (transcript) or let a reader drop repeats (jsonl), against the real daemon
/// killed with SIGKILL in the middle of a stream, and `speakbridge sessions --json` with the daemon's home.
@Suite("End to end: transcripts and framed FIFO", .serialized)
struct TranscriptTests {
    static func lines(_ n: Int, prefix: String) -> [String] { (1...n).map { "\(prefix) \($0) — é ✓" } }

    /// The JSON objects of a JSONL text (one per line).
    static func objects(_ text: String) -> [JSONValue] {
        text.split(separator: "\n").compactMap { try? JSONValue.parse(Array($0.utf8)) }
    }

    @Test("transcript sink: kill -9 three times mid-stream, restart: every line once in the JSONL; sessions --json lists it")
    func transcriptSurvivesAKill() throws {
        let pair = Pair()
        defer { pair.stop() }
        let directory = pair.desktopHome + "/transcripts"
        try pair.startDaemon(sinks: ["transcript:" + directory])
        try pair.join()
        var info = stat()
        #expect(stat(directory, &info) == 0 && info.st_mode & 0o777 == 0o700, "serve creates the directory 0700")
        let all = Self.lines(3_000, prefix: "t")
        let sender = try pair.sendLines(all, pace: 0.05)
        func written() -> [JSONValue] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            return names.filter { $0.hasSuffix(".jsonl") }.flatMap {
                Self.objects((try? String(contentsOfFile: directory + "/" + $0, encoding: .utf8)) ?? "")
            }
        }
        for kill in 1...3 {
            try Harness.wait("more lines in the transcript") { written().count >= 300 * kill }
            #expect(written().count < all.count, "the daemon must be killed mid-stream")
            pair.daemon?.kill9()
            usleep(100_000)
            try pair.startDaemon(sinks: ["transcript:" + directory])
        }
        #expect(try sender.wait(timeout: 90).status == 0)
        try Harness.wait("all lines") { written().count >= all.count }
        usleep(300_000)
        let objects = written()
        #expect(objects.compactMap { $0["text"]?.stringValue } == all)
        #expect(objects.compactMap { $0["seq"]?.int64Value } == Array(1...Int64(all.count)))

        let devices = try run(["devices", "--json"], home: pair.desktopHome).stdout
        let phone = try #require(try JSONValue.parse(Array(devices.utf8)).arrayValue?.first?["id"]?.stringValue)
        // With the daemon running and after it stopped: the same answer, read from the files.
        for round in 0..<2 {
            let listed = try run(["sessions", "--json"], home: pair.desktopHome)
            #expect(listed.status == 0, "\(listed.stderr)")
            let list = try #require(try JSONValue.parse(Array(listed.stdout.utf8)).arrayValue)
            #expect(list.count == 1)
            let entry = try #require(list.first)
            #expect(entry["device"]?.stringValue == phone)
            #expect(entry["lines"]?.int64Value == Int64(all.count))
            #expect(entry["session"]?.stringValue == objects.first?["session"]?.stringValue)
            let path = try #require(entry["path"]?.stringValue)
            #expect(path.hasPrefix(directory + "/") && path.hasSuffix(".md"))
            let markdown = try String(contentsOfFile: path, encoding: .utf8)
            #expect(markdown.contains("\n\n\(all[0])\n<!-- seq 1 -->\n\n")
                    && markdown.hasSuffix("\n\n\(all.last!)\n<!-- seq \(all.count) -->\n\n"))
            #expect(markdown.components(separatedBy: "t 7 — é ✓\n<!--").count == 2, "each line once in the Markdown")
            if round == 0 { pair.daemon?.terminate() }
        }
        let human = try run(["sessions"], home: pair.desktopHome)
        #expect(human.status == 0 && human.stdout.contains("3000 lines") && human.stdout.contains(phone))
    }

    @Test("sessions without a transcript sink says how to get one")
    func sessionsWithoutTranscripts() throws {
        let pair = Pair()
        defer { pair.stop() }
        let json = try run(["sessions", "--json"], home: pair.desktopHome)
        #expect(json.status == 0 && json.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
        let human = try run(["sessions"], home: pair.desktopHome)
        #expect(human.status == 0 && (human.stdout + human.stderr).contains("--sink transcript:DIR"))
    }

    @Test("jsonl sink: kill -9 three times mid-stream, restart: a reader that drops seen seqs gets every line exactly once")
    func jsonlSurvivesAKill() throws {
        let pair = Pair()
        defer { pair.stop() }
        let fifo = pair.desktopHome + "/dictation.jsonl"
        try pair.startDaemon(sinks: ["jsonl:" + fifo])
        let reader = FifoReader(path: fifo)
        reader.start()
        defer { reader.stop() }
        try pair.join()
        let all = Self.lines(3_000, prefix: "j")
        let sender = try pair.sendLines(all, pace: 0.05)
        for kill in 1...3 {
            try Harness.wait("more lines on the FIFO") { reader.count >= 300 * kill }
            #expect(reader.count < all.count, "the daemon must be killed mid-stream")
            pair.daemon?.kill9()
            usleep(100_000)
            try pair.startDaemon(sinks: ["jsonl:" + fifo])
        }
        #expect(try sender.wait(timeout: 90).status == 0)
        // What an editor plugin does: keep the highest seq per (device, session), drop anything at or below it.
        var seen: [String: Int64] = [:]
        var kept: [String] = []
        var repeats = 0
        func consume(_ lines: [String]) {
            for line in lines {
                guard let object = try? JSONValue.parse(Array(line.utf8)),
                      let device = object["device"]?.stringValue, let session = object["session"]?.stringValue,
                      let seq = object["seq"]?.int64Value, let text = object["text"]?.stringValue else {
                    Issue.record("not a JSON line: \(line)")
                    continue
                }
                let key = device + "/" + session
                if seq <= seen[key] ?? 0 {
                    repeats += 1
                    continue
                }
                seen[key] = seq
                kept.append(text)
            }
        }
        try Harness.wait("all lines") { reader.count >= all.count }
        usleep(300_000)
        consume(reader.snapshot)
        #expect(kept == all)
        // Class (b): each kill repeats at most the one write it interrupted (a few short lines), never loses one.
        #expect(repeats <= 3 * 64, "\(repeats) repeated lines")
    }
}
