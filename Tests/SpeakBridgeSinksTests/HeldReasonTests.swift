import Testing
@testable import SpeakBridgeSinks

/// What a device is told when a sink holds its text: the kind of hold in fixed words, never the sink's own reason
/// (window titles, paths, keys held, tool output). A stolen phone read the user's window titles live before.
@Suite struct HeldReasonTests {
    static let secretA = FocusedWindow(id: 1, name: "Inbox – Re: layoff list Q1 – Thunderbird")
    static let secretB = FocusedWindow(id: 2, name: "Online banking: account 1234")

    /// Every reason FocusGuard gives maps to its kind, and nothing of either window's title gets through.
    @Test func focusReasonsKeepTheirKindAndLoseTheTitles() {
        var guardian = FocusGuard()
        #expect(guardian.check(session: "s", focused: Self.secretA) == .type)
        let verdicts = [guardian.check(session: "s", focused: Self.secretB),
                        guardian.check(session: "s", focused: nil),
                        guardian.check(session: "s", focused: Self.secretB, targetGone: { _ in true })]
        let reasons = verdicts.compactMap { if case .hold(let why) = $0 { why } else { nil } }
        #expect(reasons.count == 3)
        #expect(reasons[0].contains(Self.secretA.name) && reasons[0].contains(Self.secretB.name),
                "the desktop's own reason still names both windows: \(reasons[0])")
        let sent = reasons.map(HeldReason.forDevices)
        #expect(sent == [HeldReason.focusMoved, HeldReason.noFocus, HeldReason.windowGone])
        for text in sent {
            #expect(!text.contains("Inbox") && !text.contains("banking") && !text.contains("1234"), "\(text)")
        }
    }

    /// The focus moving while a text is typed (`TypeSink`, a session's own hold) is a focus hold too.
    @Test func focusMovingWhileTypingIsAFocusHold() {
        let reason = HeldReason.Marker.focusMovedWhileTyping + Self.secretA.name + "\" while typing: the rest is held"
        #expect(HeldReason.forDevices(reason) == HeldReason.focusMoved)
    }

    @Test func aFIFOWithoutReaderIsNamedButNotItsPath() {
        #expect(HeldReason.forDevices(HeldReason.Marker.noReader + "/home/alice/private/notes.fifo") == HeldReason.noReader)
        #expect(!HeldReason.noReader.contains("/home"))
    }

    /// Anything not on the allow-list — a modifier key held down (which would tell when the user holds Ctrl), a
    /// tool's error output, a display name, a reason written later — is `other`.
    @Test func everythingElseIsOther() {
        for reason in ["a modifier key is held down (Control_L): typing would send shortcuts",
                       "wtype failed: compositor does not support virtual-keyboard on wayland-1",
                       "cannot open display :0 (no such file)", "", "focus moved", "the window \"x\""] {
            #expect(HeldReason.forDevices(reason) == HeldReason.other, "\(reason)")
        }
    }
}
