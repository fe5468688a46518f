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
///   delivered first, or at all, unless the user says so: `release` appends them to the live journal (they go
///   out with the next `send`, after what is already queued there), `clear` drops them.
/// Every change takes the live journal's lock (`<ID>.journal.lock`), so it never races a running `send`.
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
    static func entries(_ home: Home, _ names: [JournalName]) throws(StoreError) -> [Entry] {
        var entries: [Entry] = []
        for name in names {
            let path = home.outboxDirectory + "/" + name.file
            let loaded = try Outbox.load(path)
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

    /// Appends every held line of `desktop` to its live journal (oldest pairing first) and removes the held
    /// files. Waits for a running `send` to that desktop. Returns how many lines were released.
    public static func release(home: Home, desktop: DeviceID, waiting: () -> Void = {}) throws(StoreError) -> Int {
        let outbox = try Outbox(home: home, desktop: desktop, waiting: waiting)
        let held = try list(home: home).filter { $0.held && $0.desktop == desktop.compact }
        var released = 0
        for entry in held {
            let loaded = try Outbox.load(entry.path)
            let texts = loaded.chunks.filter { $0.seq > loaded.acked }.map(\.text)
            _ = try outbox.append(texts: texts)
            try outbox.sync()
            guard unlink(entry.path) == 0 else {
                throw .shelf(.io("remove", entry.path, errno: errno),
                             "its \(texts.count) line(s) are also queued in the live journal now, so a later release "
                             + "would queue them twice",
                             hint: "remove that file by hand (its lines go out with the next `send`)")
            }
            released += texts.count
        }
        // The held files' removal must be durable: else a crash could bring them back, and a later release would
        // queue their lines a second time.
        if released > 0, !FileIO.syncDirectory(of: outbox.path) {
            throw .unsyncedShelf(home, errno: errno,
                                 "\(released) held line(s) are in the live journal (synced) and go out with the next "
                                 + "`send`, but the held files' removal may not survive a crash: after one they "
                                 + "could be held again, and a later release would send them twice")
        }
        return released
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
        let lockFD = try Outbox.lock(home.outboxDirectory + "/" + desktop + suffix, wait: false)
        defer { close(lockFD) }
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
