import SpeakBridgeStore
import SpeakBridgeSupport

/// `Sender` when the desktop has more of the session than the journal (`OutboxWindow+Renumber.swift`): the core has
/// renumbered the chunks read since; the journal is rewritten with their new numbers before any of them goes out.
extension Sender {
    /// Rewrites the journal with the core's renumbered chunks (`Outbox.renumber`: fsynced). False when that failed:
    /// nothing renumbered may go out (the journal still holds the old numbers), so the run ends with an error (exit
    /// 74); the next `send` loads the old numbers and renumbers again. On `queue`.
    @inline(never)  // a rare path: kept out of `perform`
    func renumberJournal(after: UInt64, by shift: UInt64) -> Bool {
        do {
            try outbox.renumber(by: shift, unacknowledged: core.window.pending,
                                ack: max(ackToJournal, core.window.acked))
        } catch {
            status.error("cannot rewrite the journal with the lines' new numbers: \(PeerText.escape(error.description))",
                         hint: error.hint ?? "check the disk (dmesg); the next `speakbridge send` tries again")
            exitOverride = Self.exitIOError
            apply(.stop(Self.exitIOError))
            return false
        }
        // The rewrite synced everything the journal holds, in a new file: no fsync is owed, and an earlier failed
        // sync's file is gone.
        journalFailure = nil
        needsSync = false
        owed.removeAll(keepingCapacity: true)
        return true
    }
}
