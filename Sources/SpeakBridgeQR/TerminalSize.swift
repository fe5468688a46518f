#if canImport(Glibc)
private import Glibc
#elseif canImport(Darwin)
private import Darwin
#endif

/// A terminal's size in character cells.
public struct TerminalSize: Sendable, Equatable, CustomStringConvertible {
    public var columns: Int
    public var rows: Int

    public init(columns: Int, rows: Int) {
        self.columns = columns
        self.rows = rows
    }

    /// The classic terminal: what is assumed when nothing better is known.
    public static let classic = TerminalSize(columns: 80, rows: 24)

    /// "80×24".
    public var description: String { "\(columns)×\(rows)" }

    /// The size of the terminal behind the first of `descriptors` that is one (TIOCGWINSZ), else `COLUMNS` and
    /// `LINES` from the environment, else nil. A zero or absurd size counts as unknown.
    public static func current(descriptors: [Int32] = [1, 2, 0]) -> TerminalSize? {
        for fd in descriptors where isatty(fd) == 1 {
            var size = winsize()
            // Why unsafe (a variadic C call): TIOCGWINSZ fills exactly one `struct winsize` we own.
            if ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, let known = plausible(Int(size.ws_col), Int(size.ws_row)) {
                return known
            }
        }
        return fromEnvironment(columns: getenv("COLUMNS").map { String(cString: $0) },
                               lines: getenv("LINES").map { String(cString: $0) })
    }

    /// `COLUMNS`/`LINES` as a size; nil unless both are plausible numbers.
    public static func fromEnvironment(columns: String?, lines: String?) -> TerminalSize? {
        guard let columns = columns.flatMap({ Int($0) }), let lines = lines.flatMap({ Int($0) }) else { return nil }
        return plausible(columns, lines)
    }

    private static func plausible(_ columns: Int, _ rows: Int) -> TerminalSize? {
        (1...10_000).contains(columns) && (1...10_000).contains(rows) ? TerminalSize(columns: columns, rows: rows) : nil
    }
}
