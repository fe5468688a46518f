/// What a device is told when a sink holds its text: the `reason` of a `held` message. A kind of hold, in fixed
/// words, never the sink's own reason.
///
/// Why: a sink's reason is written for the desktop's user (the log, `status`) and names what is on the desktop —
/// the titles of the windows the focus moves between ("focus moved from window \"Inbox – Re: …\" to …"), files,
/// displays, the keys held down, a tool's error output. Sent as it was, a paired device (a stolen phone) read the
/// user's window titles live: each focus change was a new reason, so a new `held`. Now a device learns only which
/// kind of hold it is, from an allow-list (`kinds`); anything else is `other`, so a reason added later leaks
/// nothing by default. The text never contains any part of the sink's reason.
///
/// The markers are the starts of the reasons the sinks write (`FocusGuard`, `TypeSink`, `FIFOSink`), kept here next to the
/// words devices get; `HeldReasonTests` checks each producer's reason maps to its kind.
public enum HeldReason {
    /// Starts of sink reasons, as the sinks write them.
    enum Marker {
        static let noFocus = "no window has the keyboard focus"
        static let focusMoved = "focus moved from window \""
        static let focusMovedWhileTyping = "focus moved away from window \""
        static let windowGone = "the window \""
        static let windowGoneMiddle = "\" this session typed into is gone"
        static let noReader = "no reader on FIFO "
    }

    /// The device's words for each kind (sent as the `held` reason).
    static let noFocus = "no window on the desktop has the keyboard focus: held until one has it"
    static let focusMoved = "the focus moved away from the window this session types into: held until it returns "
        + "or `\(FocusGuard.retargetCommand)` on the desktop"
    static let windowGone = "the window this session typed into is gone: held until `\(FocusGuard.retargetCommand)` "
        + "on the desktop"
    static let noReader = "no reader on FIFO: held until a program on the desktop opens it"
    static let other = "the sink cannot take text now: held; `speakbridge status` on the desktop says why"

    /// The `held` reason for devices, for the sink's own `reason`.
    public static func forDevices(_ reason: String) -> String {
        if reason.hasPrefix(Marker.noFocus) { return noFocus }
        if reason.hasPrefix(Marker.focusMoved) || reason.hasPrefix(Marker.focusMovedWhileTyping) { return focusMoved }
        if reason.hasPrefix(Marker.windowGone) && reason.contains(Marker.windowGoneMiddle) { return windowGone }
        if reason.hasPrefix(Marker.noReader) { return noReader }
        return other
    }
}
