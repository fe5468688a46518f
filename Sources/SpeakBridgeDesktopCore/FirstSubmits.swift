/// Which connections have had chunks submitted: a connection's first submit is urgent (the pipeline fsyncs it
/// without its pacing wait, since a one-shot `send --text` waits for that ack to exit), later ones are not.
///
/// The connection of the last submit is kept apart, so a paced stream's next line (almost always from the same
/// connection) costs a compare instead of a set insert (a hash of the ID per line).
public struct FirstSubmits: Sendable {
    private var seen: Set<ConnectionID> = []
    private var last: ConnectionID?

    public init() {}

    /// True for the first submit on `id` since it opened (or since an earlier connection with its ID closed).
    public mutating func isFirst(_ id: ConnectionID) -> Bool {
        if id == last { return false }
        last = id
        return seen.insert(id).inserted
    }

    /// `id` closed: a later connection that gets the same ID starts afresh.
    public mutating func closed(_ id: ConnectionID) {
        seen.remove(id)
        if last == id { last = nil }
    }
}
