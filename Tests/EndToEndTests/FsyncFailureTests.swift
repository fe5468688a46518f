#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeTestSupport
import Testing

/// A failed fsync is never ignored and never "retried" into a false success, on either side, with the state
/// directory on a disk whose fsyncs fail (`FailingDisk`: FUSE). Real daemon, real `send`, real FIFO.
@Suite("End to end: fsync failures", .serialized)
struct FsyncFailureTests {
    /// The inode of `path` (0 if it is missing): a rewrite replaces the file, a sync of the same file does not.
    static func inode(_ path: String) -> UInt64 {
        var info = stat()
        return stat(path, &info) == 0 ? UInt64(info.st_ino) : 0
    }

    /// A pair whose `side` home's state directory is on a failing disk; `body` runs, then the daemon stops, the
    /// disk is unmounted and the homes go (in that order, whatever `body` threw).
    static func withFailingDisk(under side: (Pair) -> String, _ body: (Pair, FailingDisk) throws -> Void) throws {
        let pair = Pair()
        let disk = try FailingDisk(over: side(pair) + "/state")
        defer {
            pair.daemon?.terminate()
            disk.unmount()
            pair.stop()
        }
        try body(pair, disk)
    }

    /// The daemon's progress log on the failing disk: while its fsyncs fail nothing is acknowledged (the phone's
    /// journal keeps the lines) and the daemon says so at once, once; afterwards the log is rewritten, the lines
    /// are acknowledged, the FIFO holds each line once, in order, and the daemon says it recovered.
    @Test("desktop: a failed progress-log fsync acknowledges nothing, is logged, and recovers by a rewrite")
    func daemonProgressLogOnFailingDisk() throws {
        try Self.withFailingDisk(under: \.desktopHome) { pair, disk in
            let (_, reader) = try pair.startWithFIFO()
            defer { reader.stop() }
            let first = try pair.send(["before"])
            #expect(first.status == 0, "send failed: \(first.stderr)")
            let progressLog = pair.desktopHome + "/state/progress.log"
            let before = Self.inode(progressLog)

            disk.failing = true
            // Not acknowledged while the progress log cannot be synced: `send` gives up (75), the lines stay queued.
            let failed = try run(["send", "--text", "one", "--text", "two", "--text", "three", "--timeout", "3"],
                                 home: pair.phoneHome)
            #expect(failed.status == 75, "send should not have been acknowledged: \(failed.status) \(failed.stderr)")
            let queued = JournalContents(directory: pair.phoneHome + "/state/outbox").pendingTexts
            #expect(queued == ["one", "two", "three"])
            #expect(disk.failedSyncs >= 2, "the daemon kept trying")
            let daemonErr = pair.daemon?.stderr ?? ""
            #expect(daemonErr.contains("speakbridge: error: cannot make delivery progress durable"), "\(daemonErr)")
            #expect(daemonErr.contains("progress.log") && daemonErr.contains("Input/output error"), "\(daemonErr)")
            #expect(daemonErr.components(separatedBy: "cannot make delivery progress durable").count == 2,
                    "once per failure streak: \(daemonErr)")
            let status = try run(["status"], home: pair.desktopHome)
            #expect(status.stdout.contains("Input/output error") || status.stderr.contains("Input/output error"),
                    "status shows the failure: \(status.stdout) \(status.stderr)")

            disk.failing = false
            try Harness.wait("the daemon's recovery", timeout: 10) {
                (pair.daemon?.stderr ?? "").contains("delivery progress is durable again")
            }
            // Recovered by a rewrite (a new file renamed over the log), not by syncing the file whose sync failed.
            #expect(Self.inode(progressLog) != before, "the progress log was rewritten")
            let again = try pair.send(["four"])
            #expect(again.status == 0, "send failed: \(again.stderr)")
            #expect(again.stderr.contains("resending 3 unacknowledged chunk(s)"), "\(again.stderr)")
            try Harness.wait("five lines on the FIFO") { reader.count >= 5 }
            usleep(200_000)  // a duplicate would come now
            #expect(reader.snapshot == ["before", "one", "two", "three", "four"])
            #expect(JournalContents(directory: pair.phoneHome + "/state/outbox").pendingTexts == [])
        }
    }

    /// `send`'s journal on the failing disk, while the desktop does not answer (so the journal must be synced): a
    /// warning (once), every line still arrives once, in order; the journal is rewritten once the disk works again
    /// (said once), and the next run finds nothing to resend.
    @Test("send: a failed journal fsync warns, lines still arrive once, the journal is rewritten")
    func sendJournalOnFailingDisk() throws {
        try Self.withFailingDisk(under: \.phoneHome) { pair, disk in
            let (_, reader) = try pair.startWithFIFO()
            defer { reader.stop() }
            let (sender, input) = try pair.pipedSend()
            defer { sender.terminate() }
            try input.write(contentsOf: Data("a0\n".utf8))  // the journal is open (and synced) before the disk fails
            try Harness.wait("the first line on the FIFO") { reader.count >= 1 }
            let outbox = pair.phoneHome + "/state/outbox"
            let names = (try? FileManager.default.contentsOfDirectory(atPath: outbox)) ?? []
            let journal = outbox + "/" + (names.first { $0.hasSuffix(".journal") } ?? "missing")
            let before = Self.inode(journal)
            disk.failing = true
            // A line the desktop acknowledges within 50 ms needs no fsync of the journal (Sender+Clock.swift): the
            // desktop is stopped, so a1's write is fsynced at its deadline, and that fails.
            let daemon = try #require(pair.daemon)
            kill(daemon.pid, SIGSTOP)
            var stopped = true
            defer { if stopped { kill(daemon.pid, SIGCONT) } }
            try input.write(contentsOf: Data("a1\n".utf8))
            try Harness.wait("the journal warning") { sender.stderr.contains("cannot sync the journal") }
            kill(daemon.pid, SIGCONT)
            stopped = false
            try input.write(contentsOf: Data("a2\na3\n".utf8))
            try Harness.wait("four lines on the FIFO") { reader.count >= 4 }
            usleep(1_300_000)  // at least one rewrite tried (and failed) meanwhile
            disk.failing = false
            try Harness.wait("the journal's recovery", timeout: 10) {
                sender.stderr.contains("journal is durable again")
            }
            #expect(Self.inode(journal) != before, "the journal was rewritten (a new file), not synced again")
            try input.write(contentsOf: Data("a4\n".utf8))
            try input.close()
            let outcome = try sender.wait(timeout: 30)
            #expect(outcome.status == 0, "all acknowledged: exit 0 (\(outcome.stderr))")
            #expect(outcome.stderr.contains("speakbridge: warning: cannot sync the journal"), "\(outcome.stderr)")
            #expect(outcome.stderr.contains("Input/output error"), "\(outcome.stderr)")
            #expect(outcome.stderr.contains("would not survive a crash of this machine"), "\(outcome.stderr)")
            #expect(outcome.stderr.components(separatedBy: "cannot sync the journal").count == 2,
                    "once per failure streak: \(outcome.stderr)")
            #expect(outcome.stderr.components(separatedBy: "journal is durable again").count == 2, "\(outcome.stderr)")
            // A sane journal: nothing pending, and the next run resends nothing.
            #expect(JournalContents(directory: pair.phoneHome + "/state/outbox").pendingTexts == [])
            let next = try pair.send(["a5"])
            #expect(next.status == 0, "send failed: \(next.stderr)")
            #expect(!next.stderr.contains("resending"), "\(next.stderr)")
            try Harness.wait("six lines on the FIFO") { reader.count >= 6 }
            usleep(200_000)
            #expect(reader.snapshot == ["a0", "a1", "a2", "a3", "a4", "a5"])
        }
    }

    /// The phone's disk full while `send` streams: the lines it cannot journal are kept in memory and stdin is not
    /// read meanwhile (nothing lost, one warning); with room again they go out, each once, in order, and reading
    /// goes on. Before, `send` exited 1 at the first line it could not journal, the lines of that read gone from
    /// the input, the error printed once per read after it, with a hint that nothing was lost.
    @Test("send: a full disk holds the input without losing a line, and it goes on when there is room")
    func sendHoldsInputOnAFullDisk() throws {
        try Self.withFailingDisk(under: \.phoneHome) { pair, disk in
            let (reader, sender, input, lines) = try Self.holdingSend(pair, disk, prefix: "c") { try $0.pipedSend() }
            defer { reader.stop(); sender.terminate() }
            #expect(disk.spaceFailures > 0)
            let during = reader.count
            usleep(1_500_000)  // a retry fails meanwhile: still held, nothing more arrives, send still runs
            #expect(reader.count == during && sender.process.isRunning)
            disk.freeSpace = nil
            try Harness.wait("every line on the FIFO", timeout: 20) { reader.count >= 1 + lines.count }
            try input.write(contentsOf: Data("c-last\n".utf8))  // reading went on
            try input.close()
            let outcome = try sender.wait(timeout: 30)
            #expect(outcome.status == 0, "\(outcome.stderr)")
            #expect(outcome.stderr.components(separatedBy: "reading stopped").count == 2, "once: \(outcome.stderr)")
            #expect(outcome.stderr.contains("the journal takes input again"), "\(outcome.stderr)")
            #expect(!outcome.stderr.contains("error"), "\(outcome.stderr)")
            usleep(200_000)
            #expect(reader.snapshot == ["c0"] + lines + ["c-last"])
        }
    }

    /// A pipe closed while its input is held (a full disk, reading stopped): the end was never read, so `send`
    /// waited for room forever; it sees the hang-up at a retry, reads the rest, and gives up the usual 30 s after
    /// the end (exit 74, naming the lines never journaled). The lines before the hold were delivered.
    @Test("send: the input's pipe closes while it is held on a full disk: exit 74 about 30 s after, naming the lines")
    func sendSeesTheEndOfAHeldPipe() throws {
        try Self.heldInputEnds { pair in try pair.pipedSend() }
    }

    /// The same with a TCP socket on stdin (socat, inetd-style services): a peer that closed gives the socket no
    /// POLLHUP on Linux, only POLLRDHUP, so the end went unseen and `send` waited for room forever (found in review).
    @Test("send: stdin a TCP socket whose peer closes while input is held on a full disk: exit 74 about 30 s after")
    func sendSeesTheEndOfAHeldSocket() throws {
        try Self.heldInputEnds { pair in
            signal(SIGPIPE, SIG_IGN)
            let (writer, accepted) = try Self.loopbackConnection()
            let input = FileHandle(fileDescriptor: accepted, closeOnDealloc: true)
            let sender = try Proc(["send"], home: pair.phoneHome, stdin: input, label: "send-socket")
            try? input.close()
            return (sender, FileHandle(fileDescriptor: writer, closeOnDealloc: true))
        }
    }

    /// A `send` (started by `start`, with the writing end of its stdin) takes a line, then the disk fills and 2,000
    /// lines are held; the writing end closes: exit 74 with the give-up's error, and only whole journaled lines
    /// reached the FIFO, in order.
    static func heldInputEnds(_ start: (Pair) throws -> (Proc, FileHandle)) throws {
        try withFailingDisk(under: \.phoneHome) { pair, disk in
            let (reader, sender, input, lines) = try holdingSend(pair, disk, prefix: "e", start: start)
            defer { reader.stop(); sender.terminate() }
            let delivered = reader.count
            try input.close()
            let outcome = try sender.wait(timeout: 60)
            #expect(outcome.status == 74, "EX_IOERR: \(outcome.status) \(outcome.stderr)")
            #expect(outcome.stderr.contains("could not be journaled in 30 s and were not sent"), "\(outcome.stderr)")
            #expect(reader.snapshot == ["e0"] + lines.prefix(delivered - 1), "only whole journaled lines, in order")
        }
    }

    /// A daemon with a FIFO sink and its reader; a `send` (started by `start`, with the writing end of its stdin)
    /// takes line PREFIX0, then the disk fills and 2,000 more lines are written — more than the journal's room ahead
    /// (it grows by 4 KiB at first), so an append must grow it, and fails. Returns once `send` says it holds them.
    static func holdingSend(_ pair: Pair, _ disk: FailingDisk, prefix: String, start: (Pair) throws -> (Proc, FileHandle))
        throws -> (FifoReader, Proc, FileHandle, [String]) {
        let (_, reader) = try pair.startWithFIFO()
        let sender: Proc, input: FileHandle
        do { (sender, input) = try start(pair) } catch { reader.stop(); throw error }
        do {
            try input.write(contentsOf: Data("\(prefix)0\n".utf8))
            try Harness.wait("the first line on the FIFO") { reader.count >= 1 }
            disk.freeSpace = 0
            let lines = (1...2_000).map { "\(prefix)\($0) a line read while the disk is full" }
            try input.write(contentsOf: Data(lines.map { $0 + "\n" }.joined().utf8))
            try Harness.wait("the hold's warning") { sender.stderr.contains("reading stopped, nothing is lost") }
            return (reader, sender, input, lines)
        } catch {
            reader.stop()
            sender.terminate()
            throw error
        }
    }

    /// Both ends of a TCP connection on 127.0.0.1: (the connecting socket, the accepted one).
    static func loopbackConnection() throws -> (Int32, Int32) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && listen(listener, 1) == 0
                && getsockname(listener, $0, &length) == 0 }
        }
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let connected = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) == 0 }
        }
        let accepted = accept(listener, nil, nil)
        guard bound, connected, accepted >= 0 else { throw HarnessError("cannot make a loopback TCP connection") }
        return (client, accepted)
    }

    /// The journal itself fills the disk (a run keeps every line's record until it ends): once every line is
    /// acknowledged, `send` cuts it back to its header in place (which takes no room) and goes on. Before, the run
    /// stopped for good at the first line it could not journal.
    @Test("send: a journal that filled the disk is cut back once its lines are acknowledged, and the run goes on")
    func sendFreesItsOwnJournalsRoom() throws {
        try Self.withFailingDisk(under: \.phoneHome) { pair, disk in
            let (_, reader) = try pair.startWithFIFO()
            defer { reader.stop() }
            let (sender, input) = try pair.pipedSend()
            defer { sender.terminate() }
            try input.write(contentsOf: Data("d0\n".utf8))
            try Harness.wait("the first line on the FIFO") { reader.count >= 1 }
            disk.freeSpace = 400_000  // about 5,000 lines' records: the journal alone fills it
            let lines = (1...12_000).map { "d\($0) a line that fills the journal" }
            for start in stride(from: 0, to: lines.count, by: 1_000) {
                try input.write(contentsOf: Data(lines[start..<start + 1_000].map { $0 + "\n" }.joined().utf8))
                usleep(20_000)
            }
            try Harness.wait("every line on the FIFO", timeout: 30) { reader.count >= 1 + lines.count }
            #expect(disk.spaceFailures > 0, "the disk never filled")
            #expect(sender.stderr.contains("the journal takes input again"), "\(sender.stderr)")
            try input.close()
            let outcome = try sender.wait(timeout: 30)
            #expect(outcome.status == 0, "\(outcome.stderr)")
            usleep(200_000)
            #expect(reader.snapshot == ["d0"] + lines)
        }
    }

    /// A run that ends with unacknowledged lines in a journal that could not be synced exits 74 (EX_IOERR) with an
    /// error saying what is at stake; the lines are still in the journal and the next `send` delivers them.
    @Test("send: unacknowledged lines in an unsynced journal at exit: exit 74, delivered by the next run")
    func sendEndsWithUnsyncedJournal() throws {
        try Self.withFailingDisk(under: \.phoneHome) { pair, disk in
            let (fifo, reader) = try pair.startWithFIFO()
            defer { reader.stop() }
            let first = try pair.send(["b0"])  // the journal exists (created while the disk works)
            #expect(first.status == 0, "send failed: \(first.stderr)")
            pair.daemon?.terminate()  // no desktop: nothing is acknowledged

            disk.failing = true
            let failed = try run(["send", "--text", "b1", "--text", "b2", "--timeout", "1"], home: pair.phoneHome)
            #expect(failed.status == 74, "EX_IOERR: \(failed.status) \(failed.stderr)")
            #expect(failed.stderr.contains("speakbridge: error: cannot sync the journal"), "\(failed.stderr)")
            #expect(failed.stderr.contains("2 line(s) not acknowledged"), "\(failed.stderr)")

            disk.failing = false
            try pair.startDaemon(sinks: ["fifo:" + fifo])
            let next = try pair.send(["b3"])
            #expect(next.status == 0, "send failed: \(next.stderr)")
            try Harness.wait("four lines on the FIFO") { reader.count >= 4 }
            usleep(200_000)
            #expect(reader.snapshot == ["b0", "b1", "b2", "b3"])
        }
    }

    /// `join` (holding the lines of an earlier pairing), `outbox release` and `outbox clear` with the phone's outbox on
    /// a disk whose directory fsyncs fail: each exits 1 with an error that says what is done and what a crash could
    /// undo; none reports success.
    @Test("outbox: a failed directory fsync in join, release and clear is an error saying what is left (exit 1)")
    func shelfDirectorySyncFailures() throws {
        try Self.withFailingDisk(under: \.phoneHome) { pair, disk in
            try pair.startDaemon(sinks: ["stdout"])
            try pair.join()
            let devices = try run(["devices", "--json"], home: pair.desktopHome).stdout
            let id = try #require(devices.range(of: #"[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}"#, options: .regularExpression))
            #expect(try run(["devices", "revoke", String(devices[id])], home: pair.desktopHome).status == 0)
            #expect(try run(["send", "--text", "old", "--timeout", "10"], home: pair.phoneHome).status == 77)

            disk.failDirectorySyncs(only: "/outbox")  // not state/ itself: the pairing is saved there first
            let joined = try run(["join", try pair.pairCode(), "--name", "phone"], home: pair.phoneHome)
            #expect(joined.status == 1)
            #expect(joined.stderr.contains("paired, but setting aside the earlier pairing's outbox failed: "
                                           + "cannot sync "), "\(joined.stderr)")
            #expect(joined.stderr.contains("1 line(s) were moved aside as held, but the move may not survive a crash"))
            #expect(!joined.stderr.contains("are held, not sent"), "\(joined.stderr)")
            #expect(disk.failedDirectorySyncs >= 1)

            disk.failingDirectories = false
            #expect(try pair.send(["new"], timeout: 15).status == 0)
            disk.failingDirectories = true
            let released = try run(["outbox", "release"], home: pair.phoneHome)
            #expect(released.status == 1)
            #expect(released.stderr.contains("error: cannot sync "), "\(released.stderr)")
            #expect(released.stderr.contains("1 held line(s) were queued in the live journal, but that may not "
                                             + "survive a crash, so the held files are kept"), "\(released.stderr)")
            #expect(!released.stderr.contains("queued again"), "\(released.stderr)")

            let cleared = try run(["outbox", "clear", "--yes"], home: pair.phoneHome)
            #expect(cleared.status == 1)
            #expect(cleared.stderr.contains("1 line(s) were dropped, but their removal may not survive a crash"),
                    "\(cleared.stderr)")
            #expect(!cleared.stderr.contains("dropped 1 line(s) queued for"), "\(cleared.stderr)")
            disk.failingDirectories = false
            #expect(try run(["outbox"], home: pair.phoneHome).stderr.contains("the outbox is empty"))
        }
    }

    /// `join` (removing the earlier pairing's journal, every line in it acknowledged) and `outbox clear` with the
    /// phone's outbox on a disk whose unlinks fail: each exits 1 with an error naming the journal left behind (and for
    /// `clear`, the lines still in it); neither reports success. Before, both ignored the failed unlink and exited 0.
    @Test("outbox: a journal that cannot be removed in join or clear is an error naming it (exit 1)")
    func shelfRemovalFailures() throws {
        try Self.withFailingDisk(under: \.phoneHome) { pair, disk in
            try pair.startDaemon(sinks: ["stdout"])
            try pair.join()
            #expect(try pair.send(["acknowledged"], timeout: 15).status == 0)

            disk.failUnlinks(endingWith: ".journal")
            let joined = try run(["join", try pair.pairCode(), "--name", "phone"], home: pair.phoneHome)
            #expect(joined.status == 1, "\(joined.stderr)")
            #expect(joined.stderr.contains("paired, but setting aside the earlier pairing's outbox failed: "
                                           + "cannot remove "), "\(joined.stderr)")
            #expect(joined.stderr.contains("every line in it was acknowledged, so nothing is lost or sent again, but "
                                           + "the next `send` would go on with the earlier pairing's session"),
                    "\(joined.stderr)")
            #expect(joined.stderr.contains("hint: remove that file by hand before the next `send`"), "\(joined.stderr)")
            #expect(disk.failedUnlinks == 1)

            pair.daemon?.terminate()  // no desktop: the next lines stay queued
            disk.failingUnlinks = false
            _ = try run(["send", "--text", "q1", "--text", "q2", "--timeout", "1"], home: pair.phoneHome)
            disk.failUnlinks(endingWith: ".journal")
            let cleared = try run(["outbox", "clear", "--yes"], home: pair.phoneHome)
            #expect(cleared.status == 1)
            #expect(cleared.stderr.contains("error: cannot remove "), "\(cleared.stderr)")
            #expect(cleared.stderr.contains("0 line(s) were dropped, but 2 line(s) are still in 1 journal(s) that "
                                            + "could not be removed: "), "\(cleared.stderr)")
            #expect(cleared.stderr.contains(".journal (2 line(s))"), "\(cleared.stderr)")
            #expect(!cleared.stderr.contains("dropped 2 line(s) queued for"), "\(cleared.stderr)")

            disk.failingUnlinks = false
            let again = try run(["outbox", "clear", "--yes"], home: pair.phoneHome)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(again.stderr.contains("dropped 2 line(s) queued for"), "\(again.stderr)")
            #expect(try run(["outbox"], home: pair.phoneHome).stderr.contains("the outbox is empty"))
        }
    }
}
