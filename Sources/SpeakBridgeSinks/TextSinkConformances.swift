// The tool-based sinks show only the text: class (a) (`DeliveryClass.recordBeforeWrite`), through `TextSink`'s
// adapter. Declared here so their own files keep only what they do.
extension ClipboardSink: TextSink {}
extension TypeSink: TextSink {}

extension TypeSink {
    /// Typing is focus-safe per session: each text goes with its "device/session" key, so a session types only
    /// into the window that had the focus at its first text (`FocusTrackingSink`). A call types for about
    /// `TypeSink.turn` at most, so that other devices' texts go between the pieces of a long one.
    public func deliver(_ items: [SinkItem], willWrite: (Int) throws -> Void,
                        didWrite: (Int) -> Void) throws(SinkError) {
        try deliver(items.map(\.chunk.text), sessions: items.map { "\($0.device)/\($0.session)" }, turn: Self.turn,
                    willComplete: willWrite)
        didWrite(items.count)
    }
}
