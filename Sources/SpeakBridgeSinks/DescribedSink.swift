/// A sink that checks at start that it can work, and says how it works.
///
/// `serve` calls `probe()` once after making the sink: a failure stops it with the error and its hint (a dead
/// DISPLAY, a compositor without the virtual-keyboard protocol) instead of starting "ok" and failing on the first
/// chunk. `method` is shown by `status` and logged at start.
public protocol DescribedSink: Sink {
    /// How the sink delivers and why this way, e.g. `XTEST on X11 :0 (characters outside the keyboard layout
    /// bound to 40 spare keycodes; focus-safe)`. Never contains transcript text.
    var method: String { get }
    /// Checks that the sink can deliver now; throws the reason and what to do. May refine `method` (a probed
    /// fallback such as ydotool where the compositor refuses wtype).
    func probe() throws(SinkError)
}

/// A sink that types into windows and keeps each session to the window it started in (see `FocusGuard`).
public protocol FocusTrackingSink: Sink {
    /// Delivers like `deliver(_:willComplete:)`, with the session each text belongs to (any stable key, e.g.
    /// "device/session"): a session's texts go only to the window that had the focus at its first text.
    func deliver(_ texts: [String], sessions: [String], willComplete: (Int) throws -> Void) throws(SinkError)
    /// The user's "type here" command: every session's next text goes to the window focused now (and held text
    /// is typed there). Returns a sentence for the user naming that window.
    func retarget() throws(SinkError) -> String
}
