// How `pair` and `serve` show a pairing code in a terminal.
//
// Flow:
//   1. the terminal's size (the descriptor written to, then the others, then COLUMNS/LINES, else 80×24);
//   2. PairingScreen.plan: the QR when QR, code and instruction line fit the terminal, else the size they need;
//   3. it fits: QR, the code once, one instruction line;
//      it does not: the code, what the QR would need, and the way out: `pair --compact` when the code has
//      more than one address and the compact code's QR would fit, else a bigger terminal (zoom out).
import SpeakBridgeProtocol
import SpeakBridgeQR
import SpeakBridgeStore
import SpeakBridgeSupport

enum PairingDisplay {
    /// Shows `code`; `toStderr` for `serve` (whose stdout may carry received text), else stdout for the QR and code.
    static func show(code: String, lifetime: Int64, toStderr: Bool, pairCommand: String) {
        let terminal = TerminalSize.current(descriptors: toStderr ? [2, 1] : [1, 2]) ?? .classic
        let instructions = "scan the QR or run: speakbridge join CODE (single use, \(duration(lifetime)))"
        let instructionLength = "speakbridge: ".count + instructions.count
        let write: (String) -> Void = toStderr ? { Console.raw($0 + "\n") } : { Console.out($0) }
        let plan: PairingScreen
        do {
            plan = try PairingScreen.plan(code: code, instructionLength: instructionLength, terminal: terminal,
                                          colored: true)
        } catch {
            write(code)
            Console.info("no QR: \(error); run on the phone: speakbridge join CODE (single use, \(duration(lifetime)))")
            return
        }
        switch plan {
        case .qr(let qr):
            // `qr` ends in "\n"; the code follows on the next line, printed once.
            write(String(qr.dropLast()) + "\n" + code)
            Console.info(instructions)
        case .tooSmall(let required):
            write(code)
            Console.info("the QR is not shown: with this code it needs a \(required) terminal, this one is "
                         + "\(terminal); run on the phone: speakbridge join CODE (single use, \(duration(lifetime)))")
            if let compact = compacted(code), fits(compact, instructionLength: instructionLength, terminal: terminal) {
                Console.info("hint: `\(pairCommand) --compact` makes a code with only the first of its "
                             + "\(addressCount(code)) addresses, whose QR fits this terminal")
            } else {
                Console.info("hint: enlarge the window or zoom out (Ctrl+-) to at least \(required), then run "
                             + "`\(pairCommand)` again\(addressCount(code) > 1 ? ", with --compact for a smaller code" : "")")
            }
        }
    }

    /// `pair --web`: the QR of the page's URL, the URL once, the fingerprint to compare, one instruction line.
    static func showWeb(url: String, qrText: String, lifetime: Int64, fingerprint: String) {
        let terminal = TerminalSize.current(descriptors: [1, 2]) ?? .classic
        let instructions = "scan the QR with the phone's camera and open the page (single use, \(duration(lifetime)))"
        switch try? PairingScreen.plan(code: qrText, instructionLength: instructions.count + 13, terminal: terminal,
                                       colored: true) {
        case .qr(let qr)?:
            Console.out(String(qr.dropLast()) + "\n" + url)
        case .tooSmall(let required)?:
            Console.out(url)
            Console.info("the QR is not shown: it needs a \(required) terminal, this one is \(terminal); enlarge the "
                         + "window or zoom out (Ctrl+-) and run the command again, or open the address above")
        case nil:
            Console.out(url)
        }
        Console.info(instructions)
        Console.info("the browser warns about the self-signed certificate: its SHA-256 fingerprint must be \(fingerprint)")
    }

    /// The same code with only its first address (the desktop does not check the addresses: they only tell the
    /// client where to dial); nil if the code has one address or none, or does not parse.
    static func compacted(_ code: String) -> String? {
        guard var parsed = try? PairingCode.parse(code), parsed.addresses.count > 1 else { return nil }
        parsed.addresses = Array(parsed.addresses.prefix(1))
        return parsed.encoded()
    }

    static func addressCount(_ code: String) -> Int {
        (try? PairingCode.parse(code))?.addresses.count ?? 0
    }

    static func fits(_ code: String, instructionLength: Int, terminal: TerminalSize) -> Bool {
        if case .qr = try? PairingScreen.plan(code: code, instructionLength: instructionLength, terminal: terminal,
                                              colored: false) {
            return true
        }
        return false
    }

    /// "5 min" for whole minutes, else "90 s".
    static func duration(_ seconds: Int64) -> String {
        seconds % 60 == 0 ? "\(seconds / 60) min" : "\(seconds) s"
    }
}
