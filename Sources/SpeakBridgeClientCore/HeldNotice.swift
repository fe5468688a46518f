import SpeakBridgeProtocol

/// `{"type":"held","session":S,"seq":N,"sink":"clipboard","reason":"..."}` from the desktop: a sink there has
/// not taken line N of session S, because of `reason`. The line stays journaled; the ack is still awaited.
///
/// Decoding shim: `Message` has no `held` case on this branch, so `InitiatorMachine` hands the plaintext out as
/// `.unreadable` and `decode` reads it here. Once `Message.held` exists, `ClientCore` maps `.received(.held(…))`
/// to `receive(HeldNotice(…))` and this decoder goes.
public struct HeldNotice: Sendable, Equatable {
    public var session: String
    public var seq: UInt64
    public var sink: String
    public var reason: String

    /// Longest sink name and reason shown (in Unicode scalars; longer ones are cut, with an ellipsis).
    static let maxSinkScalars = 64
    static let maxReasonScalars = 300

    public init(session: String, seq: UInt64, sink: String, reason: String) {
        self.session = session
        self.seq = seq
        self.sink = sink
        self.reason = reason
    }

    /// The line the user sees (after `speakbridge: `); the desktop's strings escaped and cut.
    public var line: String {
        "desktop holds line \(seq) at \(PeerText.escape(sink, limit: Self.maxSinkScalars)): "
            + PeerText.escape(reason, limit: Self.maxReasonScalars)
    }

    /// A `held` message, or nil for anything else (or a malformed one: it is only a notice, so it is dropped).
    public static func decode(_ plaintext: [UInt8]) -> HeldNotice? {
        guard plaintext.count <= SpeakBridgeProtocol.maxFrameSize,
              let value = try? JSONValue.parse(plaintext, maxDepth: 4),
              value["type"]?.stringValue == "held",
              let session = value["session"]?.stringValue, MessageCodec.isValidSessionID(session),
              let seq = value["seq"]?.int64Value, seq >= 1,
              let sink = value["sink"]?.stringValue, !sink.isEmpty,
              let reason = value["reason"]?.stringValue
        else { return nil }
        return HeldNotice(session: session, seq: UInt64(seq), sink: sink, reason: reason)
    }
}
