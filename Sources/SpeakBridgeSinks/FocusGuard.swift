/// Focus safety for typing: each session types only into the window that had the focus when its first text was
/// typed.
///
/// Rules (`check`):
/// - A session's first text goes to the focused window, which becomes its target.
/// - A later text is typed only while the target has the focus; otherwise it is held (the sink's `deliver` fails
///   with the reason, the daemon retries, and typing resumes by itself when the focus comes back).
/// - No focused window at all holds the text too (keys would go nowhere).
/// - `retarget()` (the user's command, `speakbridge type --here`) forgets every target: each session's next text
///   goes to the window focused then, which becomes its new target.
/// - At most `capacity` sessions are remembered (least recently typed dropped first; a dropped session starts
///   over as if new).
struct FocusGuard: Sendable {
    enum Verdict: Equatable {
        case type
        case hold(String)
    }

    static let retargetCommand = "speakbridge type --here"

    private var targets: [String: FocusedWindow] = [:]
    private var order: [String] = []
    let capacity: Int

    init(capacity: Int = 256) {
        self.capacity = capacity
    }

    /// Whether a text of `session` may be typed now that `focused` has the focus; records the target on a
    /// session's first text. `targetGone` tells whether the target window no longer exists (checked only when
    /// the focus has moved).
    mutating func check(session: String, focused: FocusedWindow?, targetGone: (FocusedWindow) -> Bool = { _ in false }) -> Verdict {
        guard let focused else {
            return .hold(HeldReason.Marker.noFocus + ": held until one has it")
        }
        guard let target = targets[session] else {
            remember(session, focused)
            return .type
        }
        if target.id == focused.id {
            touch(session)
            return .type
        }
        if targetGone(target) {
            return .hold(HeldReason.Marker.windowGone + "\(target.name)" + HeldReason.Marker.windowGoneMiddle
                         + " (focus is on \"\(focused.name)\"): "
                         + "held until `\(Self.retargetCommand)`")
        }
        return .hold(HeldReason.Marker.focusMoved + "\(target.name)\" to \"\(focused.name)\": held until focus returns or "
                     + "`\(Self.retargetCommand)`")
    }

    /// Forgets every target (see the rules above).
    mutating func retarget() {
        targets.removeAll()
        order.removeAll()
    }

    /// The target of `session`, if it has typed.
    func target(of session: String) -> FocusedWindow? { targets[session] }

    private mutating func remember(_ session: String, _ window: FocusedWindow) {
        if targets.count >= capacity, let oldest = order.first {
            order.removeFirst()
            targets[oldest] = nil
        }
        targets[session] = window
        order.append(session)
    }

    private mutating func touch(_ session: String) {
        guard order.last != session, let index = order.firstIndex(of: session) else { return }
        order.remove(at: index)
        order.append(session)
    }
}
