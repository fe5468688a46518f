#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import SpeakBridgeProtocol
import SpeakBridgeSupport

extension OutboxShelf {
    /// A journal file of the outbox directory as its name says (nothing opened): `<ID>.journal` is a desktop's live
    /// journal, `<ID>.held-<UNIX TIME>[-n].journal` one held from an earlier pairing.
    struct JournalName {
        var file: String
        var desktop: String
        var heldSince: Date?
    }

    /// The journals in `directory` by name, in no order; nil when it cannot be read. One readdir(3) pass: cheap
    /// enough for `send`'s start (`mayHoldLines`).
    static func journalNames(_ directory: String) -> [JournalName]? {
        guard let dir = opendir(directory) else { return nil }
        defer { closedir(dir) }
        var names: [JournalName] = []
        while let entry = readdir(dir) {
            let name = directoryEntryName(entry) { String(decoding: $0, as: UTF8.self) }
            guard name.hasSuffix(suffix) else { continue }
            let stem = String(name.dropLast(suffix.count))
            var journal = JournalName(file: name, desktop: stem, heldSince: nil)
            if let marker = stem.plainRange(of: heldMarker) {  // not firstRange(of:): PlainText.swift
                journal.desktop = String(stem[..<marker.lowerBound])
                let stamp = stem[marker.upperBound...].prefix { $0.isNumber }
                journal.heldSince = Double(stamp).map(Date.init(timeIntervalSince1970:)) ?? Date(timeIntervalSince1970: 0)
            }
            names.append(journal)
        }
        return names
    }

    /// The desktops (compact IDs, sorted) with a held journal in the outbox directory, by name only: the ones
    /// `outbox release` goes through. Unlike `list`, this includes a held file whose lines an interrupted release
    /// already queued, so that a release again removes it (opening the live journal does).
    public static func heldDesktops(home: Home) throws(StoreError) -> [String] {
        try home.prepare()
        return Set((journalNames(home.outboxDirectory) ?? []).filter { $0.heldSince != nil }.map(\.desktop)).sorted()
    }

    /// Whether the outbox directory holds a held journal of `desktop`, by name only (nothing opened or parsed).
    /// `send` asks this at start and counts the held lines (`heldCount`) only when it is true; false means
    /// `heldCount` would be 0. An unreadable directory answers true (then `heldCount` decides).
    public static func mayHoldLines(home: Home, desktop: DeviceID) -> Bool {
        guard let names = journalNames(home.outboxDirectory) else { return true }
        return names.contains { $0.heldSince != nil && $0.desktop == desktop.compact }
    }
}
