#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

/// What `send` tells the user while it runs, on stderr.
///
/// - On a terminal (stderr is a TTY): one status line, `speakbridge: "office": queued 3 / delivered 10 / waiting
///   for the desktop (connection refused) for 12 s`, rewritten in place (`\r` + erase line) at most every
///   `redrawInterval`; other messages erase it, print their line, and it comes back below them. Cut to the
///   terminal's width, so it never wraps (a wrapped line could not be rewritten in place).
/// - Otherwise (a log, a pipe, the journal): plain lines only, no escape sequence ever: one line when the
///   desktop becomes unreachable or reachable again, and `still waiting for the desktop (…)` every
///   `stillWaitingInterval` while it stays unreachable, so the log never goes quiet.
/// Not thread-safe: used on the sender's queue only. (Lines typed on the same terminal echo after the status line;
/// it is redrawn on the next line after Enter, and only when its content changes.)
final class SendStatus {
    enum Link: Equatable {
        case connecting
        case connected(String)
        case waiting(String)
    }

    let isTerminal: Bool
    let desktopName: String
    let stillWaitingInterval: Double
    let redrawInterval = 0.1
    var link = Link.connecting
    var waitingSince: Double = 0
    var queued = 0
    var delivered: UInt64 = 0
    var shown: String?
    var lastDraw: Double = -1
    var lastStillWaiting: Double = 0

    init(isTerminal: Bool, desktopName: String, stillWaitingInterval: Double) {
        self.isTerminal = isTerminal
        self.desktopName = desktopName
        self.stillWaitingInterval = stillWaitingInterval
    }

    /// The live line is drawn on a terminal unless `--quiet` asked for warnings and errors only.
    static var stderrIsTerminal: Bool { isatty(2) == 1 && !Console.isQuiet }
    /// stdin is a terminal too: the user types the lines below the status line.
    let typingHere = isatty(0) == 1

    // MARK: - Messages

    func info(_ text: String) { around { Console.info(text) } }
    func warning(_ text: String) { around { Console.warning(text) } }
    func error(_ text: String, hint: String?) { around { Console.error(text, hint: hint) } }

    /// Erases the status line (if shown), runs `print`, and lets the next `tick` draw it again.
    func around(_ print: () -> Void) {
        erase()
        print()
    }

    func erase() {
        guard isTerminal, shown != nil else { return }
        Console.raw("\r\u{1B}[K")
        shown = nil
        lastDraw = -1
    }

    // MARK: - State

    /// The desktop answered. Off a terminal, says so when it had been reported unreachable.
    func connected(_ address: String, now: Double) {
        if case .waiting = link { info("connected to \"\(desktopName)\" at \(address)") }
        link = .connected(address)
        lastDraw = -1
    }

    /// The desktop cannot be reached (yet); `reason` says why.
    func waiting(_ reason: String, now: Double) {
        if case .waiting = link {
            link = .waiting(reason)
            return
        }
        link = .waiting(reason)
        waitingSince = now
        lastStillWaiting = now
        if !isTerminal { info("waiting for the desktop \"\(desktopName)\" (\(reason)); retrying") }
        lastDraw = -1
    }

    /// Called every few tens of milliseconds: redraws the line on a terminal, or prints the periodic line.
    func tick(now: Double, queued: Int, delivered: UInt64) {
        self.queued = queued
        self.delivered = delivered
        if isTerminal {
            guard lastDraw < 0 || now - lastDraw >= redrawInterval else { return }
            lastDraw = now
            draw(line(now: now))
        } else if case .waiting(let reason) = link, now - lastStillWaiting >= stillWaitingInterval {
            lastStillWaiting = now
            info("still waiting for the desktop \"\(desktopName)\" (\(reason)) for \(Int(now - waitingSince)) s; "
                 + "\(queued) line(s) queued")
        }
    }

    func line(now: Double) -> String {
        var text = "speakbridge: \"\(desktopName)\": queued \(queued) / delivered \(delivered) / "
        switch link {
        case .connecting: text += "connecting"
        case .connected(let address): text += "connected (\(address))"
        case .waiting(let reason):
            text += "waiting for the desktop (\(reason))"
            // A ticking counter redraws the line every second; while someone types on the same terminal (stdin),
            // each redraw would scramble their echo, so the line changes only when the state does.
            if !typingHere { text += " for \(Int(now - waitingSince)) s" }
        }
        return text
    }

    func draw(_ text: String) {
        // The desktop's name and the reasons are peer- or system-chosen: escaped, and cut to the width.
        var safe = PeerText.escape(text)
        let width = Self.terminalWidth()
        if safe.count >= width { safe = String(safe.prefix(max(10, width - 2))) + "…" }
        guard safe != shown else { return }
        shown = safe
        Console.raw("\r\u{1B}[K" + safe)
    }

    static func terminalWidth() -> Int {
        var size = winsize()
        if ioctl(2, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 80
    }
}
