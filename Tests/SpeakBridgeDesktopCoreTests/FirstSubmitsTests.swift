import SpeakBridgeDesktopCore
import Testing

/// The daemon's rule for an urgent submit (`FirstSubmits`): the first on each connection, also when connections
/// alternate, and again for a new connection that reuses a closed one's ID.
@Suite("First submits per connection")
struct FirstSubmitsTests {
    /// `isFirst` outside `#expect` (whose expansion cannot call a mutating method).
    func first(_ submits: inout FirstSubmits, _ id: ConnectionID) -> Bool { submits.isFirst(id) }

    @Test func onlyEachConnectionsFirstSubmitIsFirst() {
        var submits = FirstSubmits()
        let (a, b) = (ConnectionID(1), ConnectionID(2))
        #expect(first(&submits, a))
        #expect(!first(&submits, a))
        #expect(!first(&submits, a))
        #expect(first(&submits, b))
        #expect(!first(&submits, a), "a came before b: not its first, although it is not the last one seen")
        #expect(!first(&submits, b))
    }

    @Test func aClosedConnectionsIDStartsAfresh() {
        var submits = FirstSubmits()
        let (a, b) = (ConnectionID(1), ConnectionID(2))
        #expect(first(&submits, a))
        submits.closed(a)
        #expect(first(&submits, a), "the last connection closed: its ID is new again")
        #expect(first(&submits, b))
        submits.closed(a)  // not the last one seen
        #expect(first(&submits, a))
        #expect(!first(&submits, b))
        submits.closed(ConnectionID(9))  // never seen: nothing changes
        #expect(!first(&submits, a))
    }
}
