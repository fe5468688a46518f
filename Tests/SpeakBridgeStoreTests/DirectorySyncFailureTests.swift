#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeTestSupport
import Testing
@testable import SpeakBridgeStore

/// A directory fsync that fails is reported, never taken for success: the state directory is on a disk whose
/// directory fsyncs fail (`FailingDisk`: FUSE, Tests/fuse/failfs.c), file fsyncs still succeeding. Each test says
/// what the failed call leaves on disk.
@Suite("Store: failed directory fsyncs", .serialized)
struct DirectorySyncFailureTests: JournalFixture {
    let root = "/tmp/sb-dirsync-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    var desktop: DeviceID { device }

    func files() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: home.outboxDirectory)) ?? []).sorted()
    }

    /// A live journal for `desktop` with `texts` unacknowledged.
    func queue(_ texts: [String]) throws {
        let box = try Outbox(home: home, desktop: desktop)
        _ = try box.append(texts: texts)
        try box.sync()
    }

    /// The error `body` throws (it must throw a StoreError).
    func storeError(_ body: () throws(StoreError) -> Void) -> StoreError? {
        do throws(StoreError) {
            try body()
            return nil
        } catch {
            return error
        }
    }

    @Test("atomicWrite: the new content holds the name, but the directory's failed fsync throws")
    func atomicWriteThrows() throws {
        try withFailingDisk { disk in
            try home.prepare()
            let path = home.state + "/file"
            try FileIO.atomicWrite(path, Array("old".utf8))
            disk.failingDirectories = true
            let error = storeError { () throws(StoreError) in try FileIO.atomicWrite(path, Array("new".utf8)) }
            #expect(error?.message == "cannot sync \(path): Input/output error")
            #expect(disk.failedDirectorySyncs == 1)
            #expect(disk.failedSyncs == 0, "the file's own fsync succeeded")
            #expect(try FileIO.read(path) == Array("new".utf8), "renamed into place before the directory sync")
            disk.failingDirectories = false
            try FileIO.atomicWrite(path, Array("again".utf8))
            #expect(try FileIO.read(path) == Array("again".utf8))
        }
    }

    /// The rename happened, only the directory's fsync failed: the new file holds the name, so later lines go to
    /// it (before, they went to the old file, unlinked by the rename, and the next `send` never saw them).
    @Test("Outbox.rewrite: a failed directory sync throws, later lines go to the renamed file; nothing is lost")
    func outboxRewriteThrows() throws {
        try withFailingDisk { disk in
            let outbox = try Outbox(home: home, desktop: desktop)
            let chunks = try outbox.append(texts: ["one", "two", "three"])
            try outbox.sync()
            let old = outbox.log
            disk.failingDirectories = true
            #expect(throws: StoreError.self) { try outbox.rewrite(unacknowledged: chunks, ack: 1) }
            #expect(disk.failedDirectorySyncs == 1)
            #expect(outbox.log !== old, "the renamed file is the log now")
            let between = try outbox.append(text: "between")
            let meanwhile = try Outbox.load(outbox.path)
            #expect(meanwhile.chunks.filter { $0.seq > meanwhile.acked }.map(\.text) == ["two", "three", "between"])
            disk.failingDirectories = false
            try outbox.rewrite(unacknowledged: chunks + [between], ack: 1)  // from memory: every line not acked
            #expect(outbox.log !== old)
            _ = try outbox.append(text: "four")
            try outbox.sync()
            let again = try Outbox.load(outbox.path)
            #expect(again.acked == 1)
            #expect(again.chunks.filter { $0.seq > again.acked }.map(\.text) == ["two", "three", "between", "four"])
        }
    }

    @Test("hold: the lines are moved aside, and the failed directory sync is an error that says so")
    func holdReportsFailedSync() throws {
        try withFailingDisk { disk in
            try queue(["a", "b"])
            disk.failingDirectories = true
            let error = storeError { () throws(StoreError) in _ = try OutboxShelf.hold(home: home, desktop: desktop) }
            let message = try #require(error?.message)
            #expect(message.hasPrefix("cannot sync \(home.outboxDirectory): Input/output error: 2 line(s) were moved "
                                      + "aside as held, but the move may not survive a crash"))
            #expect(error?.hint != nil)
            #expect(disk.failedDirectorySyncs == 1)
            // What it says: held, not live.
            let entries = try OutboxShelf.list(home: home)
            #expect(entries.count == 1 && entries[0].held && entries[0].count == 2)
            #expect(!files().contains(desktop.compact + ".journal"))
        }
    }

    /// The live journal, replaced with the held lines and the held file's name, may not be durable: the held file
    /// stays (before: the lines were appended, the file removed, and a crash could bring it back to be released
    /// twice). Whichever survives a crash, each line is queued once: the next open of the journal removes the held
    /// file it names.
    @Test("release: the journal replace's directory sync fails: an error, the held file kept; each line queued once")
    func releaseReportsFailedSync() throws {
        try withFailingDisk { disk in
            try queue(["a", "b"])
            _ = try OutboxShelf.hold(home: home, desktop: desktop, now: Date(timeIntervalSince1970: 1_700_000_000))
            try queue(["new"])
            disk.failingDirectories = true
            let error = storeError { () throws(StoreError) in
                _ = try OutboxShelf.release(home: home, desktop: desktop)
            }
            let message = try #require(error?.message)
            #expect(message == "cannot sync \(home.outboxDirectory)/\(desktop.compact).journal: Input/output error: "
                    + "2 held line(s) were queued in the live journal, but that may not survive a crash, so the held "
                    + "files are kept: run `speakbridge outbox release` again (it removes them once the journal is "
                    + "durable; nothing is queued twice)")
            #expect(disk.failedDirectorySyncs >= 1)
            #expect(disk.failedSyncs == 0, "the new journal's own sync succeeded")
            #expect(files().contains(desktop.compact + ".held-1700000000.journal"))
            disk.failingDirectories = false
            let entries = try OutboxShelf.list(home: home)
            #expect(entries.count == 1 && !entries[0].held && entries[0].count == 3, "queued, not held")
            #expect(try OutboxShelf.release(home: home, desktop: desktop) == 0)
            #expect(!files().contains(desktop.compact + ".held-1700000000.journal"))
            #expect(try Outbox(home: home, desktop: desktop).pending.map(\.text) == ["new", "a", "b"])
        }
    }

    /// What a kill between queueing the held lines and removing the held file leaves, made here by an unlink that
    /// fails: the lines in the live journal, the held file still there. Before: a release again queued its lines a
    /// second time (sent twice).
    @Test("release: the held file cannot be removed after its lines were queued; a release again queues nothing twice")
    func releaseSurvivesFailedRemoval() throws {
        try withFailingDisk { disk in
            try queue(["a", "b"])
            _ = try OutboxShelf.hold(home: home, desktop: desktop, now: Date(timeIntervalSince1970: 1_700_000_000))
            try queue(["new"])
            let held = home.outboxDirectory + "/" + desktop.compact + ".held-1700000000.journal"
            disk.failUnlinks(endingWith: ".held-1700000000.journal")
            let error = storeError { () throws(StoreError) in
                _ = try OutboxShelf.release(home: home, desktop: desktop)
            }
            #expect(error?.message == "cannot remove \(held): Input/output error: its 2 line(s) are queued in the live "
                    + "journal, which names this file as released: the next `send` or `outbox release` to this "
                    + "desktop removes it, and nothing is queued twice")
            #expect(disk.failedUnlinks == 1)
            #expect(files().contains(desktop.compact + ".held-1700000000.journal"))
            disk.failingUnlinks = false
            #expect(try OutboxShelf.release(home: home, desktop: desktop) == 0, "before: 2, queued a second time")
            #expect(!files().contains(desktop.compact + ".held-1700000000.journal"))
            #expect(try Outbox(home: home, desktop: desktop).pending.map(\.text) == ["new", "a", "b"])
        }
    }

    @Test("clear: the lines are dropped, and the failed directory sync is an error that says so")
    func clearReportsFailedSync() throws {
        try withFailingDisk { disk in
            try queue(["a", "b", "c"])
            disk.failingDirectories = true
            let error = storeError { () throws(StoreError) in
                _ = try OutboxShelf.clear(home: home, desktop: desktop.compact, heldOnly: false)
            }
            let message = try #require(error?.message)
            #expect(message.hasPrefix("cannot sync \(home.outboxDirectory): Input/output error: 3 line(s) were dropped, "
                                      + "but their removal may not survive a crash"))
            #expect(disk.failedDirectorySyncs == 1)
            disk.failingDirectories = false
            #expect(try OutboxShelf.list(home: home).isEmpty)
        }
    }

    @Test("hold: a fully acknowledged live journal that cannot be removed is an error saying what is left")
    func holdReportsFailedRemoval() throws {
        try withFailingDisk { disk in
            do {
                let box = try Outbox(home: home, desktop: desktop)
                _ = try box.append(texts: ["a", "b"])
                try box.markAcked(2)
            }
            disk.failUnlinks(endingWith: "/" + desktop.compact + ".journal")
            let before = files()
            var held = -1
            let error = storeError { () throws(StoreError) in
                held = try OutboxShelf.hold(home: home, desktop: desktop)
            }
            // What hold found, for a failure seen once in a full run and never alone: whether the journal was there,
            // whether it had lines pending (then it is moved aside, not removed), whether failfs refused an unlink.
            let seen = "hold returned \(held); files before \(before), after \(files()); unlinks failed "
                + "\(disk.failedUnlinks); control on: \(disk.failingUnlinks)"
            let message = try #require(error?.message,
                                       "before: the failed unlink was ignored, hold returned 0 (\(seen))")
            let live = home.outboxDirectory + "/" + desktop.compact + ".journal"
            #expect(message == "cannot remove \(live): Input/output error: every line in it was acknowledged, so "
                    + "nothing is lost or sent again, but the next `send` would go on with the earlier pairing's "
                    + "session instead of starting a new one")
            #expect(error?.hint == "remove that file by hand before the next `send`")
            #expect(disk.failedUnlinks == 1)
            #expect(files().contains(desktop.compact + ".journal"), "what it says: the journal is still there")
            disk.failingUnlinks = false
            #expect(try OutboxShelf.hold(home: home, desktop: desktop) == 0)
            #expect(!files().contains(desktop.compact + ".journal"))
        }
    }

    @Test("hold: removing a fully acknowledged live journal fsyncs the directory, and a failed fsync is an error")
    func holdRemovalReportsFailedSync() throws {
        try withFailingDisk { disk in
            do {
                let box = try Outbox(home: home, desktop: desktop)
                _ = try box.append(texts: ["a"])
                try box.markAcked(1)
            }
            disk.failingDirectories = true
            let error = storeError { () throws(StoreError) in _ = try OutboxShelf.hold(home: home, desktop: desktop) }
            let message = try #require(error?.message, "before: the directory was not fsynced after the removal")
            #expect(message.hasPrefix("cannot sync \(home.outboxDirectory): Input/output error: the earlier "
                                      + "pairing's journal (every line in it acknowledged) was removed, but the "
                                      + "removal may not survive a crash"))
            #expect(disk.failedDirectorySyncs == 1)
            #expect(!files().contains(desktop.compact + ".journal"))
        }
    }

    @Test("clear: journals that cannot be removed are an error naming them and the lines they still hold")
    func clearReportsFailedRemoval() throws {
        try withFailingDisk { disk in
            try queue(["a", "b"])
            _ = try OutboxShelf.hold(home: home, desktop: desktop, now: Date(timeIntervalSince1970: 1_700_000_000))
            try queue(["c", "d", "e"])
            let held = home.outboxDirectory + "/" + desktop.compact + ".held-1700000000.journal"
            disk.failUnlinks(endingWith: ".held-1700000000.journal")
            let error = storeError { () throws(StoreError) in
                _ = try OutboxShelf.clear(home: home, desktop: desktop.compact, heldOnly: false)
            }
            let message = try #require(error?.message, "before: clear returned 3 as if all went well")
            #expect(message == "cannot remove \(held): Input/output error: 3 line(s) were dropped, but 2 line(s) are "
                    + "still in 1 journal(s) that could not be removed: \(held) (2 line(s))")
            #expect(error?.hint?.contains("run `speakbridge outbox clear` again") == true)
            #expect(disk.failedUnlinks == 1)
            // What it says: the live journal is gone, the held one is still there with its 2 lines.
            let entries = try OutboxShelf.list(home: home)
            #expect(entries.count == 1 && entries[0].held && entries[0].count == 2 && entries[0].path == held)
            disk.failingUnlinks = false
            #expect(try OutboxShelf.clear(home: home, desktop: desktop.compact, heldOnly: false) == 2)
            #expect(try OutboxShelf.list(home: home).isEmpty)
        }
    }
}
