import Foundation
import Glibc
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeTestSupport
import Testing
@testable import SpeakBridgeSinks

/// `transcript:DIR` with real files: layout and modes, resume, torn tails, hostile names, foreign directories.
@Suite(.serialized) struct TranscriptSinkTests {
    let device = DeviceID(publicKeyDigest: SHA256.hash(Array("transcript-device".utf8)))

    func item(_ seq: UInt64, _ text: String, session: String = "s1", name: String? = "Pixel 8",
              speaker: String? = nil, start: Double? = nil, end: Double? = nil) -> SinkItem {
        SinkItem(device: device, deviceName: name, session: session,
                 chunk: Chunk(seq: seq, text: text, speaker: speaker, start: start, end: end))
    }

    func deliver(_ sink: TranscriptSink, _ items: [SinkItem]) throws {
        try sink.deliver(items, willWrite: { _ in }, didWrite: { _ in })
    }

    func files(_ directory: String, _ suffix: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(suffix) }.sorted()
    }

    func text(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

    /// Markdown paragraphs for seq 1, 2… with their markers.
    func paragraphs(_ texts: [String], from first: UInt64 = 1) -> String {
        texts.enumerated().map { "\($1)\n<!-- seq \(first + UInt64($0)) -->\n\n" }.joined()
    }

    func inode(_ path: String) -> ino_t {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_ino : 0
    }

    /// Writes `items` through a sink that then goes away (the process dies); returns the transcript's base name.
    func transcript(in root: TemporaryDirectory, _ items: [SinkItem]) throws -> String {
        let sink = try TranscriptSink(directory: root.path)
        try deliver(sink, items)
        return String(try #require(try files(root.path, ".jsonl").first).dropLast(6))
    }

    /// Appends raw bytes to a file, as a crash mid-write (or another writer) would leave them.
    func append(_ path: String, _ bytes: [UInt8]) throws {
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(bytes))
        try handle.close()
    }

    func mode(_ path: String) -> mode_t {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & 0o7777 : 0
    }

    @Test func writesMarkdownJSONLAndWebVTTPrivately() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let directory = root.path + "/notes/dictation"  // missing: serve creates it
        let sink = try TranscriptSink(directory: directory)
        #expect(sink.deliveryClass == .ownPosition && sink.label == "transcript:\(directory)")
        #expect(mode(directory) == 0o700)
        try deliver(sink, [item(1, "Hello there.", speaker: "Ana", start: 1.5, end: 3.25),
                           item(2, "Two\n\nparagraphs <b> --> x", start: 65, end: 66)])
        let names = try files(directory, ".md")
        #expect(names.count == 1)
        let name = String(try #require(names.first).dropLast(3))
        #expect(name.hasSuffix("_Pixel_8"))
        for suffix in [".md", ".jsonl", ".vtt"] { #expect(mode("\(directory)/\(name)\(suffix)") == 0o600) }
        #expect(text("\(directory)/\(name).jsonl") == """
            {"device":"\(device)","name":"Pixel 8","session":"s1","seq":1,"text":"Hello there.","speaker":"Ana","start":1.5,"end":3.25}
            {"device":"\(device)","name":"Pixel 8","session":"s1","seq":2,"text":"Two\\n\\nparagraphs <b> --> x","start":65.0,"end":66.0}

            """)
        let markdown = text("\(directory)/\(name).md")
        #expect(markdown.hasPrefix("# Dictation from Pixel 8\n\nStarted "))
        #expect(markdown.hasSuffix("""
            · device `\(device)` · session `s1`

            [0:00:01] **Ana:** Hello there.
            <!-- seq 1 -->

            [0:01:05] Two  
            paragraphs <b> --> x
            <!-- seq 2 -->


            """))
        #expect(text("\(directory)/\(name).vtt") == """
            WEBVTT

            1
            00:00:01.500 --> 00:00:03.250
            <v Ana>Hello there.

            2
            00:01:05.000 --> 00:01:06.000
            Two
            paragraphs &lt;b&gt; --&gt; x


            """)
    }

    /// A restarted sink reads its position from the JSONL, skips what it holds, and continues the same files.
    @Test func aResumedSessionContinuesItsFilesWithoutRepeating() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        do {
            let sink = try TranscriptSink(directory: root.path)
            try deliver(sink, [item(1, "one"), item(2, "two"), item(1, "other session", session: "s2")])
            #expect(sink.position(device: device, session: "s1") == 2)
        }
        let sink = try TranscriptSink(directory: root.path)
        #expect(sink.position(device: device, session: "s1") == 2)
        #expect(sink.position(device: device, session: "s2") == 1)
        #expect(sink.position(device: device, session: "s3") == nil)
        try deliver(sink, [item(2, "two"), item(3, "three")])  // 2 again: the sink itself skips it
        let entries = try TranscriptDirectory.scan(root.path)
        #expect(entries.count == 2)
        let first = try #require(entries.first { $0.session == "s1" })
        #expect(first.lines == 3 && first.lastSeq == 3)
        #expect(text(first.jsonlPath).split(separator: "\n").count == 3)
        #expect(text(first.markdownPath).components(separatedBy: "\n\n").filter { ["one\n<!-- seq 1 -->", "two\n<!-- seq 2 -->", "three\n<!-- seq 3 -->"].contains($0) }.count == 3)
    }

    /// A crash in the middle of a JSONL write leaves a torn last line: it was never counted, so the restarted sink
    /// cuts it off, answers the last complete seq, and the chunk is written again — once.
    @Test func aTornLastLineIsCutOffAtStart() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let name = try transcript(in: root, [item(1, "one"), item(2, "two")])
        let jsonl = "\(root.path)/\(name).jsonl"
        try append(jsonl, Array(#"{"device":"\#(device)","session":"s1","seq":3,"te"#.utf8))
        // And the Markdown lags (a crash between the JSONL and the Markdown): it is rebuilt from the JSONL.
        try Data("# cut short\n".utf8).write(to: URL(fileURLWithPath: "\(root.path)/\(name).md"))
        chmod("\(root.path)/\(name).md", 0o600)
        let sink = try TranscriptSink(directory: root.path)
        #expect(sink.position(device: device, session: "s1") == 2)
        #expect(text(jsonl).hasSuffix("\"seq\":2,\"text\":\"two\"}\n"))
        try deliver(sink, [item(3, "three")])
        let lines = text(jsonl).split(separator: "\n")
        #expect(lines.count == 3 && lines.allSatisfy { JSONLine.decode(Array($0.utf8)) != nil })
        let markdown = text("\(root.path)/\(name).md")
        #expect(markdown.contains("\n\n" + paragraphs(["one", "two", "three"])) && !markdown.contains("cut short"))
    }

    /// The cut of a torn last line must be durable before anything is appended after it: on a disk whose fsyncs
    /// fail (`FailingDisk`: FUSE) the sink does not start, and says why; once the disk works it cuts and resumes.
    @Test func aTornLastLineWhoseCutCannotBeSyncedStopsTheStart() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let mount = root.path + "/disk"
        let disk = try FailingDisk(over: mount)
        defer { disk.unmount() }
        try deliver(try TranscriptSink(directory: mount), [item(1, "one"), item(2, "two")])
        let name = String(try #require(try files(mount, ".jsonl").first).dropLast(6))
        let jsonl = "\(mount)/\(name).jsonl"
        try append(jsonl, Array(#"{"device":"\#(device)","session":"s1","seq":3,"te"#.utf8))
        disk.failing = true
        do {
            _ = try TranscriptSink(directory: mount)
            Issue.record("the sink started with a torn line it could not cut durably")
        } catch {
            #expect(error.message == "cannot cut the torn last line off transcript \(jsonl): Input/output error")
        }
        #expect(disk.failedSyncs >= 1)
        disk.failing = false
        let sink = try TranscriptSink(directory: mount)
        #expect(sink.position(device: device, session: "s1") == 2)
        try deliver(sink, [item(3, "three")])
        let lines = text(jsonl).split(separator: "\n")
        #expect(lines.count == 3 && lines.allSatisfy { JSONLine.decode(Array($0.utf8)) != nil })
    }

    /// A crash between the JSONL line and the Markdown paragraph (and its cue): the restarted sink appends just
    /// the missing paragraphs and cues from the JSONL's tail; what the files held is not rewritten (same inode,
    /// same bytes in front).
    @Test func aCrashBeforeTheParagraphIsRepairedByAppending() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let name = try transcript(in: root, [item(1, "one", start: 1, end: 2), item(2, "two", start: 2, end: 3)])
        let (md, vtt, jsonl) = ("\(root.path)/\(name).md", "\(root.path)/\(name).vtt", "\(root.path)/\(name).jsonl")
        let (mdBefore, vttBefore) = (text(md), text(vtt))
        let (mdInode, vttInode) = (inode(md), inode(vtt))
        // The crash: seq 3 and 4 reached the JSONL (fsynced), seq 3's cue the WebVTT, nothing the Markdown.
        let lines = [item(3, "three", start: 3, end: 4), item(4, "four", start: 4, end: 5)]
            .flatMap { JSONLine.encode($0, sanitize: true) }
        try append(jsonl, lines)
        let cue = try #require(TranscriptFormat.vttCue(item(3, "three", start: 3, end: 4)))
        try append(vtt, Array(cue.utf8))

        let sink = try TranscriptSink(directory: root.path)
        #expect(sink.position(device: device, session: "s1") == 4)
        #expect(inode(md) == mdInode && inode(vtt) == vttInode, "appended in place, not rewritten")
        #expect(text(md) == mdBefore + "[0:00:03] three\n<!-- seq 3 -->\n\n[0:00:04] four\n<!-- seq 4 -->\n\n")
        let cue4 = try #require(TranscriptFormat.vttCue(item(4, "four", start: 4, end: 5)))
        #expect(text(vtt) == vttBefore + cue + cue4, "each cue once")
        try deliver(sink, [item(5, "five")])
        #expect(text(md).hasSuffix("[0:00:04] four\n<!-- seq 4 -->\n\nfive\n<!-- seq 5 -->\n\n"))
        #expect(inode(md) == mdInode)
    }

    /// A Markdown whose tail is not a marker (torn mid-paragraph, edited): rebuilt in full from the JSONL.
    @Test func anUnreadableMarkdownTailIsRebuiltInFull() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let name = try transcript(in: root, [item(1, "one"), item(2, "two")])
        let md = "\(root.path)/\(name).md"
        try append(md, Array("thr".utf8))  // a torn paragraph
        try append("\(root.path)/\(name).jsonl", JSONLine.encode(item(3, "three"), sanitize: true))
        _ = try TranscriptSink(directory: root.path)
        #expect(text(md).hasSuffix("`s1`\n\n" + paragraphs(["one", "two", "three"])))
        #expect(TranscriptFormat.lastMarkedSeq(Array("x\n<!-- seq 12 -->\n\n".utf8)[...]) == 12)
        #expect(TranscriptFormat.lastMarkedSeq(Array("x\n<!-- seq 12 -->\n".utf8)[...]) == nil)
        #expect(TranscriptFormat.lastCue(Array("WEBVTT\n\n".utf8)[...], whole: true) == .last(0))
        #expect(TranscriptFormat.lastCue(Array("WEBVTT\n\n7\n00:00:01.000 --> 00:00:02.000\nx\n\n".utf8)[...],
                                         whole: true) == .last(7))
        #expect(TranscriptFormat.lastCue(Array("WEBVTT\n\n7\n00:00:01.000 --> 00".utf8)[...], whole: true) == .unreadable)
    }

    /// The Markdown cannot be written (here: a directory in its place): the chunk still counts (it is in the
    /// JSONL), the failure is reported, and the Markdown is rebuilt whole once it can be written again.
    @Test func aFailedMarkdownWriteIsReportedAndRepairedLater() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let sink = try TranscriptSink(directory: root.path)
        try deliver(sink, [item(1, "one")])
        let name = String(try #require(try files(root.path, ".md").first).dropLast(3))
        let markdown = "\(root.path)/\(name).md"
        #expect(unlink(markdown) == 0 && mkdir(markdown, 0o700) == 0)
        do {
            try deliver(sink, [item(2, "two")])
            Issue.record("a Markdown write into a directory succeeded")
        } catch {
            #expect((error as? SinkError)?.delivered == 1)
        }
        #expect(sink.health != nil)
        #expect(sink.position(device: device, session: "s1") == 2)
        #expect(rmdir(markdown) == 0)
        try deliver(sink, [item(3, "three")])
        #expect(sink.health == nil)
        #expect(text(markdown).hasSuffix("\n\n" + paragraphs(["one", "two", "three"])))
    }

    /// Files removed while the desktop runs: the session goes on in new files, from where it was.
    @Test func removedFilesStartAgainWithoutRepeating() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let sink = try TranscriptSink(directory: root.path)
        try deliver(sink, [item(1, "one")])
        for name in try FileManager.default.contentsOfDirectory(atPath: root.path) { unlink("\(root.path)/\(name)") }
        try deliver(sink, [item(1, "one"), item(2, "two")])
        let entry = try #require(try TranscriptDirectory.scan(root.path).first)
        #expect(entry.lines == 1 && entry.lastSeq == 2)
    }

    @Test func hostileDeviceNamesMakeSafeFileNames() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let sink = try TranscriptSink(directory: root.path)
        let hostile = ["../../etc/passwd", "\u{1B}]0;pwned\u{07}", "..", "-rf", "Jörg's Phone \u{202E}gpj.exe",
                       String(repeating: "x", count: 300), "日本語の電話"]
        for (index, name) in hostile.enumerated() {
            try deliver(sink, [item(1, "hi", session: "h\(index)", name: name)])
        }
        try deliver(sink, [item(1, "hi", session: "nameless", name: nil)])
        try deliver(sink, [item(1, "hi", session: "same-second", name: "..")])  // same name, same second: -2
        let names = try files(root.path, ".jsonl").map { String($0.dropLast(6)) }
        #expect(names.count == hostile.count + 2)
        for name in names {
            let part = name.dropFirst(20)  // YYYY-MM-DD_HH-MM-SS_
            #expect(!part.isEmpty && !part.hasPrefix(".") && !part.hasPrefix("-") && !name.contains("/"))
            #expect(part.unicodeScalars.count <= TranscriptFormat.maxNameLength + 3)
            #expect(!part.unicodeScalars.contains { $0.value < 0x20 || (0x202A...0x202E).contains($0.value) })
        }
        #expect(names.contains { $0.hasSuffix("_etc_passwd") })
        #expect(names.contains { $0.hasSuffix("_日本語の電話") })
        #expect(names.filter { $0.contains("_device-\(device.compact.prefix(4))") }.count == 3)
        #expect(names.contains { $0.hasSuffix("-2") })
        // Nothing outside the directory.
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.path).count == 2 * names.count)
        // The Markdown title shows the name sanitized.
        let markdown = names.map { text("\(root.path)/\($0).md") }.joined()
        #expect(!markdown.contains("\u{1B}") && !markdown.contains("\u{202E}"))
    }

    @Test func aDirectoryOthersCanEnterIsRefused() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        #expect(chmod(root.path, 0o755) == 0)
        do {
            _ = try TranscriptSink(directory: root.path)
            Issue.record("a 0755 transcript directory was accepted")
        } catch {
            #expect(error.message.contains("open to other users") && error.hint?.contains("chmod 700") == true)
        }
    }

    @Test(.enabled(if: geteuid() == 0, "needs root to make a directory another user owns"))
    func anotherUsersDirectoryIsRefused() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let theirs = root.path + "/theirs"
        #expect(mkdir(theirs, 0o700) == 0 && chown(theirs, 65534, 65534) == 0)
        do {
            _ = try SinkFactory.make(try SinkSpec(parsing: "transcript:\(theirs)"), sanitize: true, environment: [:])
            Issue.record("another user's directory was accepted")
        } catch let error as SinkError {
            #expect(error.message.contains("owned by another user"))
        }
    }

    /// A planted symlink or a file another user owns is never read as a transcript, and never written through.
    @Test func plantedFilesAreNotTranscripts() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let target = root.path + "/target"
        #expect(mkdir(root.path + "/dir", 0o700) == 0)
        let directory = root.path + "/dir"
        #expect(FileManager.default.createFile(atPath: target, contents: Data(#"{"device":"\#(device)","session":"s1","seq":99,"text":"x"}\#n"#.utf8)))
        chmod(target, 0o600)
        #expect(symlink(target, directory + "/2020-01-01_00-00-00_x.jsonl") == 0)
        let sink = try TranscriptSink(directory: directory)
        #expect(sink.position(device: device, session: "s1") == nil)
        #expect(try TranscriptDirectory.scan(directory).isEmpty)
        try deliver(sink, [item(1, "one")])
        #expect(text(target).contains("\"seq\":99") && !text(target).contains("one"))
    }

    /// Through the real pipeline, then a second pipeline over the same directory (a restart): every chunk once.
    @Test func throughThePipelineAndARestartEveryChunkOnce() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let texts = (1...50).map { "line \($0)" }
        let first = try PipelineDriver().run(try TranscriptSink(directory: root.path), Array(texts[0..<30]))
        #expect(first.durable == 30)
        #expect(first.recorded == nil, "class (c) keeps no progress in the log")
        // The restarted desktop knows nothing from the log; the client resends everything from 1.
        let second = try PipelineDriver().run(try TranscriptSink(directory: root.path), texts)
        #expect(second.durable == 50)
        let entry = try #require(try TranscriptDirectory.scan(root.path).first)
        let lines = text(entry.jsonlPath).split(separator: "\n").compactMap { JSONLine.decode(Array($0.utf8)) }
        #expect(lines.map(\.chunk.seq) == Array(1...50) && lines.map(\.chunk.text) == texts)
    }

    @Test func clockAndNamesFormats() {
        #expect(TranscriptFormat.clock(3723.4567, millis: true) == "01:02:03.457")
        #expect(TranscriptFormat.clock(-5, millis: false) == "0:00:00")
        #expect(TranscriptFormat.clock(.infinity, millis: false) == "10000:00:00")
        #expect(TranscriptFormat.stamp(0) == "1970-01-01_00-00-00")
        #expect(TranscriptFormat.started(fromName: "2026-11-22_16-10-05_x") == "2026-11-22T16:10:05Z")
        #expect(TranscriptFormat.started(fromName: "notes") == nil)
    }
}
