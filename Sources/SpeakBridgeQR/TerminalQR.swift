/// Renders QR codes for a terminal, using Unicode half blocks so that one text line carries two module rows.
///
/// Layout: a quiet zone of `quietZone` light modules on every side (or the `Margins` given); line `i` shows module rows `2i` (upper half of
/// the cell) and `2i + 1` (lower half). When the padded height is odd the last line's lower half is light.
/// Cell glyphs: `█` both dark, `▀` only upper dark, `▄` only lower dark, space both light.
///
/// `render` adds explicit colours (black foreground on a white background, reset at the end of every line) so the
/// code has the right polarity on dark and light terminal themes alike; `renderPlain` has no escape sequences and
/// assumes dark glyphs on a light background (for tests and logs).
public enum TerminalQR {
    /// Light modules around the symbol, in modules. The QR specification asks for 4; 2 is what terminal QR
    /// renderers commonly use and phone scanners read it reliably, while keeping the code small on screen.
    public static let quietZone = 2

    /// SGR: reset, black foreground, white background, then bright white (ignored by terminals without it, which
    /// keep plain white).
    static let colorOn = "\u{1B}[0;30;47;107m"
    /// SGR reset, written at the end of every line so a cut-off output never leaves the terminal coloured.
    static let colorOff = "\u{1B}[0m"

    /// The module matrix of `text` (`true` = dark), without quiet zone.
    public static func modules(_ text: String) throws -> [[Bool]] {
        try QRSymbol(encoding: text).modules
    }

    /// The QR code of `text` as coloured half-block lines, each ending in a reset and "\n".
    public static func render(_ text: String) throws -> String {
        draw(try QRSymbol(encoding: text).modules, colored: true)
    }

    /// The QR code of `text` as half-block lines without colours, each ending in "\n".
    public static func renderPlain(_ text: String) throws -> String {
        draw(try QRSymbol(encoding: text).modules, colored: false)
    }

    /// Light modules around the symbol: `horizontal` on the left and right, `top` above, `bottom` below.
    public struct Margins: Sendable, Equatable {
        public var horizontal: Int
        public var top: Int
        public var bottom: Int

        public init(horizontal: Int, top: Int, bottom: Int) {
            self.horizontal = max(0, horizontal)
            self.top = max(0, top)
            self.bottom = max(0, bottom)
        }

        /// `quietZone` on every side.
        public static let uniform = Margins(horizontal: quietZone, top: quietZone, bottom: quietZone)
    }

    /// Draws an already encoded matrix with `quietZone` on every side.
    public static func draw(_ modules: [[Bool]], colored: Bool) -> String {
        draw(modules, colored: colored, margins: .uniform)
    }

    /// Draws an already encoded matrix with the given margins. When the padded height is odd, the last line's
    /// lower half is light (one more light module below).
    public static func draw(_ modules: [[Bool]], colored: Bool, margins: Margins) -> String {
        let size = modules.count
        let width = size + 2 * margins.horizontal
        let height = size + margins.top + margins.bottom
        func dark(_ row: Int, _ column: Int) -> Bool {
            let y = row - margins.top, x = column - margins.horizontal
            guard y >= 0, y < size, x >= 0, x < size, x < modules[y].count else { return false }
            return modules[y][x]
        }
        var out = ""
        out.reserveCapacity((height + 1) / 2 * (width * 3 + 24))
        var row = 0
        while row < height {
            if colored { out += colorOn }
            for column in 0..<width {
                switch (dark(row, column), dark(row + 1, column)) {
                case (true, true): out += "█"
                case (true, false): out += "▀"
                case (false, true): out += "▄"
                case (false, false): out += " "
                }
            }
            if colored { out += colorOff }
            out += "\n"
            row += 2
        }
        return out
    }
}
