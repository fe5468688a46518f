#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import SpeakBridgeProtocol

/// What `speakbridge outbox` sees and does: every desktop's journal in `state/outbox/`, live or held.
///
/// Files, per desktop (by compact device ID):
/// - `<ID>.journal`: the live journal `send` uses (see `Outbox`).
/// - `<ID>.held-<UNIX TIME>.journal`: lines queued under an earlier pairing with that desktop. `join` moves the
///   live journal aside this way when it pairs again (`hold`), so lines typed for the old pairing are never
///   delivered first, or at all, unless the user says so: `release` queues them in the live journal (they go
///   out with the next `send`, after what is already queued there), `clear` drops them.
/// Every change takes the live journal's lock (`<ID>.journal.lock`), so it never races a running `send`.
///
/// Release, crash-safe at every step (no line lost, none queued twice):
/// 1. The live journal is replaced atomically by one holding its lines, then the held files' lines, and a record
///    `{"released":"FILE"}` naming each held file (`Outbox.queueReleased`: fsynced, renamed, directory fsynced).
///    A crash before the rename leaves both as they were: a release again queues them once.
/// 2. The held files are removed, and the directory fsynced. A crash before that is durable can leave held files
///    whose lines are queued; the live journal names them, so whatever opens it next under the lock — `send`,
///    `release` (`Outbox.init`), `join` (`hold`), `clear` — removes them first (`settleReleased`), the directory
///    fsynced after, and `list` does not count them as held. Only after that fsync may the names go: `Outbox`
///    then compacts the journal without them (`hold` moves them aside with it, `clear` keeps or removes it). A
///    held file only ever comes from the live journal itself (`hold` renames it), so no file a live journal names
///    can appear again while that journal is live.
public enum OutboxShelf {
    public struct Entry: Sendable {
        public var desktop: String
        public var held: Bool
        /// When the lines were held (the time `join` moved them aside).
        public var heldSince: Date?
        public var session: String?
        public var count: Int
        /// The oldest queued line, as stored (not sanitized: escape it before showing it).
        public var oldest: String?
        public var path: String
    }

    static let suffix = ".journal"
    static let heldMarker = ".held-"

    static func livePath(_ home: Home, _ desktop: DeviceID) -> String {
        home.outboxDirectory + "/" + desktop.compact + suffix
    }

    /// Every journal with at least one unacknowledged line, live first, then held (oldest first), per desktop.
    public static func list(home: Home) throws(StoreError) -> [Entry] {
        try home.prepare()
        return try entries(home, journalNames(home.outboxDirectory) ?? [])
    }

    /// The entries of `names` that hold at least one unacknowledged line (each journal loaded), sorted as `list`.
    /// A held file that a live journal among `names` names as released is left out: its lines are queued there (a
    /// release that a crash interrupted; the next open of that journal removes the file).
    static func entries(_ home: Home, _ names: [JournalName]) throws(StoreError) -> [Entry] {
        var entries: [Entry] = []
        var released = Set<String>()
        // Live journals first, so that their released names are known before the held files come.
        for name in names.sorted(by: { ($0.heldSince == nil ? 0 : 1) < ($1.heldSince == nil ? 0 : 1) }) {
            if name.heldSince != nil && released.contains(name.file) { continue }
            let path = home.outboxDirectory + "/" + name.file
            let loaded = try Outbox.load(path)
            if name.heldSince == nil {
                released.formUnion(loaded.released.filter { $0.hasPrefix(name.desktop + heldMarker) })
            }
            let pending = loaded.chunks.filter { $0.seq > loaded.acked }
            guard !pending.isEmpty else { continue }
            entries.append(Entry(desktop: name.desktop, held: name.heldSince != nil, heldSince: name.heldSince,
                                 session: loaded.session, count: pending.count, oldest: pending.first?.text, path: path))
        }
        return entries.sorted {
            ($0.desktop, $0.held ? 1 : 0, $0.heldSince ?? .distantPast, $0.path)
                < ($1.desktop, $1.held ? 1 : 0, $1.heldSince ?? .distantPast, $1.path)
        }
    }

    /// Takes the lock of `desktop`'s journals without waiting; nil-free: throws `outboxBusy` if a `send` holds it.
    /// Close the returned descriptor to let go.
    public static func lock(home: Home, desktop: DeviceID) throws(StoreError) -> Int32 {
        try home.prepare()
        return try Outbox.lock(livePath(home, desktop), wait: false)
    }

    /// After a new pairing with `desktop`: moves its live journal aside as held if it has unacknowledged lines
    /// (returns how many), else removes it (a new session starts). The caller holds the lock (`lock`). Throws if the
    /// journal cannot be moved or removed, or the outbox directory cannot be fsynced after, saying what is left.
    public static func hold(home: Home, desktop: DeviceID, now: Date = Date()) throws(StoreError) -> Int {
        let live = livePath(home, desktop)
        let loaded = try Outbox.load(live)
        // Before the journal moves aside with the names in it: held files it names must not be released again.
        if !loaded.released.isEmpty { try settleReleased(loaded.released, journal: live) }
        let count = loaded.chunks.filter { $0.seq > loaded.acked }.count
        guard FileIO.exists(live) else { return 0 }
        if count == 0 {
            guard unlink(live) == 0 || errno == ENOENT else {
                throw .shelf(.io("remove", live, errno: errno),
                             "every line in it was acknowledged, so nothing is lost or sent again, but the next `send` "
                             + "would go on with the earlier pairing's session instead of starting a new one",
                             hint: "remove that file by hand before the next `send`")
            }
            guard FileIO.syncDirectory(of: live) else {
                throw .unsyncedShelf(home, errno: errno,
                                     "the earlier pairing's journal (every line in it acknowledged) was removed, but "
                                     + "the removal may not survive a crash: after one the next `send` could go on "
                                     + "with that pairing's session instead of starting a new one")
            }
            return 0
        }
        var target = home.outboxDirectory + "/" + desktop.compact + heldMarker + String(Int(now.timeIntervalSince1970))
        var n = 1
        while FileIO.exists(target + suffix) {
            n += 1
            target = home.outboxDirectory + "/" + desktop.compact + heldMarker
                + String(Int(now.timeIntervalSince1970)) + "-\(n)"
        }
        guard rename(live, target + suffix) == 0 else { throw .io("move aside", live, errno: errno) }
        guard FileIO.syncDirectory(of: live) else {
            throw .unsyncedShelf(home, errno: errno,
                                 "\(count) line(s) were moved aside as held, but the move may not survive a crash: "
                                 + "after one they could be back in the live journal and go out with the next `send`")
        }
        return count
    }

    /// Queues every held line of `desktop` in its live journal (oldest pairing first), then removes the held files
    /// (the type's doc: crash-safe at every step). Waits for a running `send` to that desktop. Returns how many lines
    /// were released. A release that a crash interrupted is finished first, by opening the live journal: its held
    /// files are removed, not released again.
    public static func release(home: Home, desktop: DeviceID, waiting: () -> Void = {}) throws(StoreError) -> Int {
        let outbox = try Outbox(home: home, desktop: desktop, waiting: waiting)
        let held = try list(home: home).filter { $0.held && $0.desktop == desktop.compact }
        guard !held.isEmpty else { return 0 }
        var files: [(file: String, chunks: [Chunk])] = []
        for entry in held {
            let loaded = try Outbox.load(entry.path)
            let name = entry.path.split(separator: "/").last.map(String.init) ?? entry.path
            files.append((name, loaded.chunks.filter { $0.seq > loaded.acked }))
        }
        let released = files.reduce(0) { $0 + $1.chunks.count }
        if let unsynced = try outbox.queueReleased(files, after: outbox.pending) {
            throw .shelf(unsynced, "\(released) held line(s) were queued in the live journal, but that may not "
                         + "survive a crash, so the held files are kept: run `speakbridge outbox release` again "
                         + "(it removes them once the journal is durable; nothing is queued twice)")
        }
        for entry in held {
            guard unlink(entry.path) == 0 || errno == ENOENT else {
                throw .shelf(.io("remove", entry.path, errno: errno),
                             "its \(entry.count) line(s) are queued in the live journal, which names this file as "
                             + "released: the next `send` or `outbox release` to this desktop removes it, and nothing "
                             + "is queued twice")
            }
        }
        guard FileIO.syncDirectory(of: outbox.path) else {
            throw .unsyncedShelf(home, errno: errno,
                                 "\(released) held line(s) are in the live journal (synced) and go out with the next "
                                 + "`send`, but the held files' removal may not survive a crash: if they come back, "
                                 + "the next `send` or `outbox release` removes them again (the live journal names "
                                 + "them as released), so nothing is sent twice")
        }
        return released
    }

    /// Removes the held files among `names` — read from the live journal at `journal`, whose lines a release
    /// queued there (`Outbox.queueReleased`) — that are still there, and fsyncs the directory, so that the journal
    /// can drop the names. The caller holds the lock. A name that is not one of this desktop's held files is
    /// ignored. Throws if a file cannot be removed or the directory cannot be fsynced: the names must then stay.
    /// `sync` false: no fsync here, for a caller that fsyncs the directory itself right after and reports a failure
    /// (`clear`; the journal keeps the names).
    static func settleReleased(_ names: [String], journal: String, sync: Bool = true) throws(StoreError) {
        var parts = journal.split(separator: "/", omittingEmptySubsequences: false)
        let base = parts.popLast().map(String.init) ?? journal
        let directory = parts.joined(separator: "/")
        let prefix = String(base.dropLast(suffix.count)) + heldMarker
        for name in names where name.hasPrefix(prefix) && name.hasSuffix(suffix) && !name.contains("/") {
            let held = directory + "/" + name
            guard unlink(held) == 0 || errno == ENOENT else {
                throw .shelf(.io("remove", held, errno: errno),
                             "an interrupted `speakbridge outbox release` queued its lines in \(journal) already; "
                             + "it must be removed before that journal is used, or its lines would be queued twice",
                             hint: "check the disk, or remove that file by hand (its lines are queued), then try again")
            }
        }
        guard !sync || FileIO.syncDirectory(of: journal) else {
            throw .shelf(.io("sync", directory, errno: errno),
                         "held files whose lines an interrupted `speakbridge outbox release` queued in \(journal) "
                         + "were removed, but the removal may not survive a crash",
                         hint: "check the disk, then try again")
        }
    }

    /// Drops `desktop`'s queued lines: held ones, and the live journal too unless `heldOnly`. Refuses (throws
    /// `outboxBusy`) while a `send` to that desktop runs. Returns how many lines were dropped. A journal that cannot
    /// be removed is an error naming it and the lines it still holds (the others are removed, their lines counted
    /// as dropped in the message); so is a failed fsync of the outbox directory after.
    public static func clear(home: Home, desktop: String, heldOnly: Bool) throws(StoreError) -> Int {
        func wanted() throws(StoreError) -> [Entry] {
            try list(home: home).filter { $0.desktop == desktop && ($0.held || !heldOnly) }
        }
        guard try !wanted().isEmpty else { return 0 }
        let live = home.outboxDirectory + "/" + desktop + suffix
        let lockFD = try Outbox.lock(live, wait: false)
        defer { close(lockFD) }
        // Held files whose lines an interrupted release queued go first: they are not held lines any more (`list`
        // leaves them out), and a `clear` of the live journal would otherwise bring their lines back as held. The
        // fsync of the directory below covers their removal too.
        let names = try Outbox.load(live).released
        if !names.isEmpty { try settleReleased(names, journal: live, sync: false) }
        // Listed again under the lock: a `release`, `join` or `send` that ended in between changed what is there
        // (lines moved into the live journal, held, or acknowledged), and a count from before would be wrong.
        let entries = try wanted()
        var dropped = 0
        var kept: [(entry: Entry, errno: Int32)] = []
        for entry in entries {
            if unlink(entry.path) == 0 || errno == ENOENT {
                dropped += entry.count
            } else {
                kept.append((entry, errno))
            }
        }
        let synced = FileIO.syncDirectory(of: home.outboxDirectory + "/x")
        let syncErrno = errno
        if let first = kept.first {
            let files = kept.map { "\($0.entry.path) (\($0.entry.count) line(s))" }.joined(separator: ", ")
            let lines = kept.reduce(0) { $0 + $1.entry.count }
            let unsynced = synced || dropped == 0 ? "" : " (their removal may not survive a crash)"
            throw .shelf(.io("remove", first.entry.path, errno: first.errno),
                         "\(dropped) line(s) were dropped\(unsynced), "
                         + "but \(lines) line(s) are still in \(kept.count) journal(s) that could not be removed: "
                         + files,
                         hint: "check the disk, then run `speakbridge outbox clear` again; `speakbridge outbox` shows "
                         + "what is still queued")
        }
        guard synced else {
            throw .unsyncedShelf(home, errno: syncErrno,
                                 "\(dropped) line(s) were dropped, but their removal may not survive a crash: after "
                                 + "one they could be queued again")
        }
        return dropped
    }

    /// Held lines for `desktop`, for a one-line notice in `send`.
    /// Only `desktop`'s held journals are read (not the live one, nor other desktops').
    public static func heldCount(home: Home, desktop: DeviceID) -> Int {
        let held = (journalNames(home.outboxDirectory) ?? []).filter { $0.heldSince != nil && $0.desktop == desktop.compact }
        return ((try? entries(home, held)) ?? []).reduce(0) { $0 + $1.count }
    }
}

extension StoreError {
    /// `hold`, `release` or `clear` failed part way (`failure`): `state` says what is done and what a crash could undo.
    static func shelf(_ failure: StoreError, _ state: String,
                      hint: String = "check the disk; `speakbridge outbox` shows what is queued and held") -> StoreError {
        StoreError(failure.message + ": " + state, hint: hint)
    }

    /// The outbox directory could not be fsynced after `hold`, `release` or `clear` changed it.
    static func unsyncedShelf(_ home: Home, errno code: Int32, _ state: String) -> StoreError {
        shelf(.io("sync", home.outboxDirectory, errno: code), state)
    }

    /// Another process (a running `send`) holds the journal of this desktop.
    static func outboxBusy(_ path: String) -> StoreError {
        StoreError("a `speakbridge send` to this desktop is running (\(path) is locked)",
                   hint: "wait for it to finish or stop it (Ctrl-C), then try again")
    }
}
