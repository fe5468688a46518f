/// When the desktop has more of a session than the client's journal: the chunks not sent yet are renumbered to
/// follow what the desktop has.
///
/// How it happens: the journal's records are written with pwrite(2) and are safe from a killed `send` at once, but
/// only the fsync makes them safe from a crash of the machine (power cut, kernel panic). A chunk the desktop has
/// acknowledged needs no fsync of the client's (the desktop's copy is durable: `Pairing/PROTOCOL.md`), so after such
/// a crash the journal can miss chunks the desktop has (also after a journal restored from a backup). Its highest
/// sequence number is then below the desktop's `delivered`, and new lines numbered after the journal would reuse
/// numbers the desktop already has: it would drop them as duplicates, silently. So when `resume` answers a
/// `delivered` above every sequence number this client may ever have sent (`sentThrough`, or what the journal held
/// at start), every chunk above that (read since, never sent) moves up by the difference: the first follows
/// `delivered`. The caller stores the new numbers durably before they go out (`send`: `Outbox.renumber`).
extension OutboxWindow {
    /// The highest sequence number that went out on any connection of this run, or was acknowledged.
    public var sentThrough: UInt64 {
        sentCount > 0 ? max(acked, storage[sentCount - 1].seq) : acked
    }

    /// Moves every chunk above `after` (none of them sent: `after` ≥ `sentThrough`) up by `shift`, and `lastSeq` with
    /// them. The caller checked that the new numbers stay valid (`canRenumber`).
    public mutating func renumber(after: UInt64, by shift: UInt64) {
        precondition(after >= sentThrough, "a chunk that went out keeps its number")
        var i = storage.count - 1
        while i >= 0 && storage[i].seq > after {
            encodedBytes -= storage[i].encodedCount  // setting `seq` drops the encoded bytes (they held the old one)
            storage[i].seq += shift
            i -= 1
        }
        lastSeq += shift
    }

    /// Whether every number stays a valid sequence number (at most 2^53, `MessageCodec.maxSeq`) after
    /// `renumber(after:by: shift)`.
    public func canRenumber(by shift: UInt64) -> Bool {
        let (top, overflow) = lastSeq.addingReportingOverflow(shift)
        return !overflow && top <= MessageCodec.maxSeq
    }
}
