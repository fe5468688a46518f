import Dispatch
import Synchronization

/// Hands events to a caller's handler in order on a private serial queue.
///
/// Why not call the handler directly: avahi callbacks run on avahi's poll thread with its lock
/// held. A handler running there could not call `stop()` (stopping joins that very thread), and a
/// slow handler would stall all mDNS work. After `close()` queued events are dropped; a handler
/// call already running is not interrupted.
final class EventQueue<Value: Sendable>: Sendable {
    private let queue: DispatchQueue
    private let handler: @Sendable (Value) -> Void
    private let closed = Atomic<Bool>(false)

    init(label: String, handler: @escaping @Sendable (Value) -> Void) {
        queue = DispatchQueue(label: label)
        self.handler = handler
    }

    func post(_ value: Value) {
        queue.async { [self] in
            if !closed.load(ordering: .acquiring) { handler(value) }
        }
    }

    func close() {
        closed.store(true, ordering: .releasing)
    }
}
