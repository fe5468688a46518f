#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeClientCore
import SpeakBridgeStore
import SpeakBridgeSupport

/// `Sender` when input cannot be journaled (the disk is full, or it fails), on `queue`.
///
/// A line goes out only once it is in the journal, so a read whose lines cannot be written there is not sent — and
/// not dropped either: it is kept in memory (`InputHold.batches`) and stdin is read no more meanwhile, so its writer blocks
/// as on a slow reader, and at most what the reads before the stop brought is in memory (one read while the watch
/// ends; a hung-up pipe's rest, which the pipe bounds).
///
/// Flow:
/// 1. A journal append throws (`accept`): the batch is held, one `speakbridge: warning:` says so and that nothing is
///    lost, and the reading stops (`deliver` answers false; the reader leaves a way to start it again).
/// 2. Every `inputRetrySeconds` the tick journals and sends the held batches, oldest first, stopping at the first
///    that still fails; at the first failure of a try it compacts the journal once (`compactJournal`: this run's
///    acknowledged lines are what fills it). Lines already in flight go on meanwhile: acks, resends and the exit
///    work as ever.
/// 3. All journaled: one line says so and the reading starts again — or, when the input ended meanwhile, the end
///    is handled now.
/// 4. Giving up: with `--timeout N` after N seconds of holding; by default only once the input has ended (a closed
///    pipe, Ctrl-D) and the default time has passed since then — an open pipe waits for room as long as it is open.
///    Input that ended while reading was stopped (a pipe's writer gone, a socket's peer closed) is seen at a retry
///    (`inputHungUp`): the reading starts once more, takes the rest into the hold, and reads its end.
///    Then an error names how many lines were read but never journaled nor sent, and `send` exits 74 (EX_IOERR).
/// `--text` does not hold: its texts are still the caller's to retry (`accept(_ texts:)`: exit 74, nothing sent).
/// Before (2026-12-07) a full disk ended `send` at once (exit 1), with the lines of the read that failed gone from
/// the input and the error repeated for every read after it; its hint said that nothing was lost.
struct InputHold {
    /// Read but not journaled, oldest first.
    var batches: [InputBatch]
    var failure: StoreError
    var since: Double
    var lastTry: Double
    /// When the input's end was read while holding (nil: still open).
    var endedAt: Double?
    /// Starts the reading again (a new watch of stdin, or the reader thread's wake-up); nil once the input ended.
    var resume: (@Sendable () -> Void)?

    var lines: Int { batches.reduce(0) { $0 + $1.lines.count } }

    /// The reader stops after a read while holding; `resume` starts it again, unless the input ended.
    mutating func stopReading(ended: Bool, at: Double, resume: @escaping @Sendable () -> Void) {
        if ended {
            endedAt = endedAt ?? at
            self.resume = nil
        } else {
            self.resume = resume
        }
    }
}

extension Sender {
    /// Seconds between two tries to journal the held input.
    static let inputRetrySeconds = 1.0

    /// Step 1, from `accept`: `batch` could not be journaled.
    @inline(never)  // a failure path: kept out of the per-line callers
    func inputHoldStarted(_ batch: InputBatch, _ error: StoreError) {
        status.warning("cannot journal input: \(PeerText.escape(error.description)); reading stopped, nothing is lost: "
                       + "the \(batch.lines.count) line(s) read are kept in memory and journaled and sent once the "
                       + "journal takes them (retrying every second); free some disk space")
        let at = now
        inputHold = InputHold(batches: [batch], failure: error, since: at, lastTry: at)
        if !ticking && core.exitCode == nil { scheduleTick() }
    }

    /// Steps 2–4, on the tick.
    @inline(never)  // a failure path: kept out of the tick's usual work
    func retryHeldInput() {
        guard var hold = inputHold else { return }
        let at = now
        guard at - hold.lastTry >= Self.inputRetrySeconds else { return }
        hold.lastTry = at
        var compacted = false
        while let batch = hold.batches.first {
            do throws(StoreError) {
                try journalAndQueue(batch)
            } catch {
                // The journal keeps every line of this run until it ends: on a full disk the acknowledged ones'
                // records are the room there is. Written anew with only what is unacknowledged, once a try.
                if !compacted, compactJournal() {
                    compacted = true
                    continue
                }
                hold.failure = error
                // Reading stopped, so the end of a pipe would never be read: its writer gone, the rest is read (a
                // pipe holds little) and kept with the hold, and its end starts the give-up's count.
                let readRest = hold.endedAt == nil && hold.resume != nil && Self.inputHungUp()
                let resume = readRest ? hold.resume : nil
                if readRest { hold.resume = nil }
                inputHold = hold
                resume?()
                giveUpHeldInputIfDue(hold, at: at)
                return
            }
            hold.batches.removeFirst()
        }
        inputHold = nil
        status.info("the journal takes input again: the lines kept in memory are journaled and sent"
                    + (hold.endedAt == nil ? "; reading goes on" : ""))
        if hold.endedAt != nil {
            endInput()
        } else {
            hold.resume?()
        }
    }

    /// Gives back the room of the acknowledged lines' records: with every line acknowledged, the journal is cut back
    /// to its header in place (`Outbox.resetIfDrained`: truncated first, so it needs no room at all); otherwise it
    /// is replaced by its header and the unacknowledged lines (`Outbox.rewrite`: a new file, fsynced, renamed over
    /// it). False when it cannot (nothing changed then, or the new file holds the name already and the next sync
    /// rewrites again: `journalFailure`).
    func compactJournal() -> Bool {
        let before = outbox.log
        let level = max(ackToJournal, core.window.acked)
        let inPlace = core.window.pending.isEmpty
        do throws(StoreError) {
            if inPlace {
                guard try outbox.resetIfDrained(acknowledged: level) else { return false }
            } else {
                try outbox.rewrite(unacknowledged: core.window.pending, ack: level)
            }
        } catch {
            // A cut in place may have begun (truncated, the header not written or not synced), and a new file renamed
            // in whose directory was not synced holds the name (appends go on into it): either way the journal is
            // untrusted until the failed-sync repair rewrites it from memory (Sender+JournalFailure.swift).
            if inPlace || outbox.log !== before {
                journalFailure = error
                needsSync = true
            }
            return false
        }
        // Everything unacknowledged is in the new file, fsynced: nothing is owed durability now.
        needsSync = false
        journalDirty = false
        owed.removeAll(keepingCapacity: true)
        journalFailure = nil
        return true
    }

    /// Whether stdin has no more to bring than what is left to read: a pipe whose writer is gone (poll(2): POLLHUP), a
    /// socket whose peer closed or shut down its writing (POLLRDHUP: Linux gives a socket no POLLHUP then) — found
    /// without reading a byte. (A regular file always polls readable: a held `send < FILE` waits for room, as with
    /// an open pipe, unless `--timeout` says otherwise.)
    static func inputHungUp() -> Bool {
        let rdHangUp: Int16 = 0x2000  // POLLRDHUP (Linux; not exported to Swift by Glibc)
        var entry = pollfd(fd: 0, events: Int16(POLLIN) | rdHangUp, revents: 0)
        return poll(&entry, 1, 0) == 1 && entry.revents & (Int16(POLLHUP) | rdHangUp) != 0
    }

    /// Step 4.
    func giveUpHeldInputIfDue(_ hold: InputHold, at: Double) {
        let limit: (seconds: Double, from: Double)?
        if let timeout = options.timeout {
            limit = timeout > 0 ? (timeout, hold.since) : nil
        } else {
            limit = hold.endedAt.map { (options.endedInputTimeout, $0) }
        }
        guard let limit, at - limit.from >= limit.seconds else { return }
        status.error("cannot journal input: \(PeerText.escape(hold.failure.description)); \(hold.lines) line(s) read "
                     + "could not be journaled in \(Int(limit.seconds)) s and were not sent",
                     hint: "free some disk space; lines read before them were journaled and go out with the next "
                         + "`speakbridge send` if not acknowledged")
        apply(.stop(Self.exitIOError))
    }
}
