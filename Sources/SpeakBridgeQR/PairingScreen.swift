// What `pair` and `serve` show for a pairing code, sized for the terminal it is shown in.
//
// Layout, top to bottom (nothing else, so that it all fits 80×24 for a code with one or two IPv4 addresses):
//   the QR: half blocks, two module rows per line, 2 light modules left, right and on top, 1 below (the code
//           line follows at once); smallest version, strongest error correction that keeps that version;
//   the code: one line (an 80-column terminal wraps it onto two rows);
//   one line of instructions (the caller prints it; it is counted here);
//   the row the cursor (or the shell prompt) is left on.
// A code of 136 characters (one IPv4 address) or 144 (two) is a version-5 symbol (37×37) at level L:
// 20 lines of QR + 2 rows of code + 1 of instructions + 1 for the cursor = 24 rows, 41 columns.

/// The pairing code's QR for a terminal, or why it is not shown.
public enum PairingScreen: Sendable, Equatable {
    /// The QR lines (each ending in "\n"), to be followed by the code and the instruction line.
    case qr(String)
    /// The QR and its text would not fit: show the code alone. `required` is the smallest terminal that holds it.
    case tooSmall(required: TerminalSize)

    /// Margins of light modules around the symbol.
    public static let margins = TerminalQR.Margins(horizontal: 2, top: 2, bottom: 1)

    /// Plans the screen for `code` in `terminal`; `instructionLength` is the length of the instruction line in
    /// columns. Throws only if the code cannot be encoded at all.
    public static func plan(code: String, instructionLength: Int, terminal: TerminalSize,
                            colored: Bool) throws(QRError) -> PairingScreen {
        let symbol = try QRSymbol.smallest(encoding: code)
        let required = requiredSize(symbolSize: symbol.size, codeLength: code.count,
                                    instructionLength: instructionLength, columns: terminal.columns)
        guard required.columns <= terminal.columns, required.rows <= terminal.rows else {
            return .tooSmall(required: required)
        }
        return .qr(TerminalQR.draw(symbol.modules, colored: colored, margins: margins))
    }

    /// The terminal the screen needs: as wide as the QR, and as tall as the QR, the code and the instruction line
    /// as `columns` wraps them, plus the row left for the cursor.
    public static func requiredSize(symbolSize: Int, codeLength: Int, instructionLength: Int,
                                    columns: Int) -> TerminalSize {
        let width = symbolSize + 2 * margins.horizontal
        let qrLines = (symbolSize + margins.top + margins.bottom + 1) / 2
        func wrapped(_ length: Int) -> Int { max(1, (length + max(1, columns) - 1) / max(1, columns)) }
        return TerminalSize(columns: width,
                            rows: qrLines + wrapped(codeLength) + wrapped(instructionLength) + 1)
    }
}
