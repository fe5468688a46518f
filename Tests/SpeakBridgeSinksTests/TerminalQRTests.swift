import Foundation
import Testing
import SpeakBridgeQR

@Suite struct TerminalQRTests {
    /// Shaped like a pairing code: QR alphanumeric characters only.
    static let pairingLike = "SB1:7Q2K-9ZXC4M.HP0A$R*T+V/W%E 1734567890:48123:127.0.0.1"

    @Test(arguments: ["A", pairingLike, "hello, wörld ✓", String(repeating: "x", count: 600)])
    func sizeFollowsTheVersionFormula(_ text: String) throws {
        let symbol = try QRSymbol(encoding: text)
        #expect((1...40).contains(symbol.version))
        #expect(symbol.size == 17 + 4 * symbol.version)
        #expect(symbol.modules.allSatisfy { $0.count == symbol.size })
        #expect(try TerminalQR.modules(text) == symbol.modules)
    }

    /// 20 alphanumeric characters fit version 1-M only in alphanumeric mode (8-bit holds 14 bytes there).
    @Test func alphanumericModeIsChosenAutomatically() throws {
        #expect(try QRSymbol(encoding: "SPEAKBRIDGE1:ABCDEFG").version == 1)
        #expect(try QRSymbol(encoding: "speakbridge1:abcdefg").version == 2)
    }

    @Test func finderPatternsSitInThreeCorners() throws {
        let m = try TerminalQR.modules(Self.pairingLike)
        let n = m.count
        func isFinder(top: Int, left: Int) -> Bool {
            for y in 0..<7 {
                for x in 0..<7 {
                    let ring = max(abs(y - 3), abs(x - 3))  // 3 = outer ring, 2 = light ring, 0...1 = centre
                    if m[top + y][left + x] != (ring != 2) { return false }
                }
            }
            return true
        }
        func separatorIsLight(top: Int, left: Int) -> Bool {
            // The row and column just inside the symbol next to the finder are light.
            let row = top == 0 ? 7 : n - 8
            let column = left == 0 ? 7 : n - 8
            let columns = left == 0 ? 0...7 : (n - 8)...(n - 1)
            let rows = top == 0 ? 0...7 : (n - 8)...(n - 1)
            return columns.allSatisfy { !m[row][$0] } && rows.allSatisfy { !m[$0][column] }
        }
        #expect(isFinder(top: 0, left: 0) && separatorIsLight(top: 0, left: 0))
        #expect(isFinder(top: 0, left: n - 7) && separatorIsLight(top: 0, left: n - 7))
        #expect(isFinder(top: n - 7, left: 0) && separatorIsLight(top: n - 7, left: 0))
        #expect(!isFinder(top: n - 7, left: n - 7))
        // Timing pattern between the top finders alternates, starting dark.
        #expect((8...(n - 9)).allSatisfy { m[6][$0] == ($0 % 2 == 0) })
    }

    @Test(arguments: [Self.pairingLike, "héllo wörld ✓ 日本"])
    func plainRenderingRoundTrips(_ text: String) throws {
        let rendered = try TerminalQR.renderPlain(text)
        #expect(!rendered.contains("\u{1B}"))
        let modules = try TerminalQR.modules(text)
        #expect(try Self.parse(rendered) == Self.withQuietZone(modules))
    }

    @Test func colouredRenderingRoundTripsAndResetsEveryLine() throws {
        let rendered = try TerminalQR.render(Self.pairingLike)
        let lines = rendered.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        let size = try TerminalQR.modules(Self.pairingLike).count + 2 * TerminalQR.quietZone
        #expect(lines.count == (size + 1) / 2)
        for line in lines {
            #expect(line.hasPrefix("\u{1B}[0;30;47;107m"))
            #expect(line.hasSuffix("\u{1B}[0m"))
        }
        let stripped = rendered.replacingOccurrences(of: "\u{1B}[0;30;47;107m", with: "")
            .replacingOccurrences(of: "\u{1B}[0m", with: "")
        #expect(try Self.parse(stripped) == Self.withQuietZone(try TerminalQR.modules(Self.pairingLike)))
    }

    @Test func rejectsWhatCannotBeEncoded() {
        #expect(throws: QRError.empty) { try QRSymbol(encoding: "") }
        #expect(throws: QRError.containsNUL) { try QRSymbol(encoding: "a\u{0}b") }
        #expect(throws: QRError.tooLong(bytes: 4000)) { try QRSymbol(encoding: String(repeating: "ü", count: 2000)) }
    }

    static let zbarimg = ["/usr/bin/zbarimg", "/usr/local/bin/zbarimg"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// A real decoder reads what the terminal would show: the half-block text is turned back into pixels.
    @Test(.enabled(if: zbarimg != nil, "zbarimg (Debian package zbar-tools) is not installed"),
          arguments: [Self.pairingLike, "hello, world: speakbridge", "héllo wörld ✓ 日本"])
    func zbarDecodesTheRenderedCode(_ text: String) throws {
        let matrix = try Self.parse(try TerminalQR.render(text)
            .replacingOccurrences(of: "\u{1B}[0;30;47;107m", with: "").replacingOccurrences(of: "\u{1B}[0m", with: ""))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("qr-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let image = directory.appendingPathComponent("code.pgm")
        try Self.pgm(matrix, scale: 6, margin: 4).write(to: image)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.zbarimg!)
        process.arguments = ["--raw", "-q", "-Sbinary", image.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        var decoded = String(decoding: data, as: UTF8.self)
        if decoded.hasSuffix("\n") { decoded.removeLast() }
        #expect(decoded == text)
    }

    // MARK: - Pairing screen (80×24)

    /// A code shaped like a real one of `length` characters: "SB1:" and Crockford base32.
    static func code(length: Int) -> String {
        let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
        var state: UInt32 = 2_463_534_242
        return "SB1:" + String((0..<(length - 4)).map { _ in
            state ^= state << 13; state ^= state >> 17; state ^= state << 5
            return alphabet[Int(state % 32)]
        })
    }

    /// 136 characters: one IPv4 address; 144: two; 160: four; 163: one IPv4 and one IPv6.
    @Test(arguments: [(136, 5), (144, 5), (160, 6), (163, 6), (345, 10)])
    func smallestSymbolForCodeLengths(_ length: Int, _ version: Int) throws {
        let symbol = try QRSymbol.smallest(encoding: Self.code(length: length))
        #expect(symbol.version == version)
        // No smaller version holds it at the weakest level; no stronger level holds it in this version.
        let stronger = QRErrorCorrection.allCases.drop { $0 != symbol.level }.dropFirst()
        for level in stronger {
            #expect(try QRSymbol(encoding: Self.code(length: length), level: level).version > version)
        }
    }

    @Test func smallestPrefersStrongerCorrectionWhenItFits() throws {
        // 20 alphanumeric characters: version 1 holds 25 at L, 20 at M, 16 at Q: M is the strongest that fits.
        let symbol = try QRSymbol.smallest(encoding: "SPEAKBRIDGE1:ABCDEFG")
        #expect(symbol.version == 1 && symbol.level == .medium)
    }

    /// One IPv4 address: QR 20 lines, code 2 rows, instructions 1, cursor 1 = exactly 24; 41 columns.
    @Test func oneAddressCodeFitsEightyByTwentyFour() throws {
        let code = Self.code(length: 136)
        #expect(PairingScreen.requiredSize(symbolSize: 37, codeLength: 136, instructionLength: 75, columns: 80)
                == TerminalSize(columns: 41, rows: 24))
        guard case .qr(let qr) = try PairingScreen.plan(code: code, instructionLength: 75, terminal: .classic,
                                                        colored: false) else {
            Issue.record("the QR of a one-address code does not fit 80×24")
            return
        }
        let lines = qr.split(separator: "\n")
        #expect(lines.count == 20)
        #expect(lines.allSatisfy { $0.count == 41 })
        // Margins: the first line is light (2 module rows), the last line's lower half is light (1 module row).
        #expect(lines.first!.allSatisfy { $0 == " " })
        #expect(!lines.last!.contains("█") && !lines.last!.contains("▄"))
        var expected = Array(repeating: [Bool](repeating: false, count: 41), count: 2)
        expected += try QRSymbol.smallest(encoding: code).modules.map { [false, false] + $0 + [false, false] }
        expected.append([Bool](repeating: false, count: 41))
        #expect(try Self.parse(qr) == expected)
    }

    @Test func tooSmallTerminalsGetNoQR() throws {
        let code = Self.code(length: 136)
        #expect(try PairingScreen.plan(code: code, instructionLength: 75,
                                       terminal: TerminalSize(columns: 80, rows: 23), colored: true)
                == .tooSmall(required: TerminalSize(columns: 41, rows: 24)))
        // 40 columns: too narrow for the QR, and the code wraps onto 4 rows.
        #expect(try PairingScreen.plan(code: code, instructionLength: 75,
                                       terminal: TerminalSize(columns: 40, rows: 60), colored: true)
                == .tooSmall(required: TerminalSize(columns: 41, rows: 20 + 4 + 2 + 1)))
        // Four addresses: version 6, 22 lines of QR: 26 rows. (`pair --compact` then offers one address.)
        #expect(try PairingScreen.plan(code: Self.code(length: 160), instructionLength: 75, terminal: .classic,
                                       colored: true)
                == .tooSmall(required: TerminalSize(columns: 45, rows: 26)))
    }

    @Test func terminalSizeFromTheEnvironment() {
        #expect(TerminalSize.fromEnvironment(columns: "100", lines: "30") == TerminalSize(columns: 100, rows: 30))
        #expect(TerminalSize.fromEnvironment(columns: "100", lines: nil) == nil)
        #expect(TerminalSize.fromEnvironment(columns: "0", lines: "30") == nil)
        #expect(TerminalSize.fromEnvironment(columns: "-5", lines: "x") == nil)
    }

    // MARK: - Helpers

    /// Reads half-block lines back into a module matrix (two rows per line); the padding row is dropped.
    static func parse(_ rendered: String) throws -> [[Bool]] {
        var rows: [[Bool]] = []
        for line in rendered.split(separator: "\n") {
            var upper: [Bool] = [], lower: [Bool] = []
            for character in line {
                switch character {
                case "█": upper.append(true); lower.append(true)
                case "▀": upper.append(true); lower.append(false)
                case "▄": upper.append(false); lower.append(true)
                case " ": upper.append(false); lower.append(false)
                default: throw ParseError.unexpected(character)
                }
            }
            rows.append(upper)
            rows.append(lower)
        }
        if let width = rows.first?.count, rows.count == width + 1 {
            #expect(rows.last!.allSatisfy { !$0 }, "the padding row must be light")
            rows.removeLast()
        }
        return rows
    }

    enum ParseError: Error { case unexpected(Character) }

    static func withQuietZone(_ modules: [[Bool]]) -> [[Bool]] {
        let zone = TerminalQR.quietZone
        let width = modules.count + 2 * zone
        let blank = [Bool](repeating: false, count: width)
        let padding = [Bool](repeating: false, count: zone)
        return Array(repeating: blank, count: zone) + modules.map { padding + $0 + padding }
            + Array(repeating: blank, count: zone)
    }

    /// A binary PGM (P5): dark modules black, `margin` extra light modules around, `scale` pixels per module.
    static func pgm(_ modules: [[Bool]], scale: Int, margin: Int) -> Data {
        let side = (modules.count + 2 * margin) * scale
        var pixels = [UInt8](repeating: 255, count: side * side)
        for (y, row) in modules.enumerated() {
            for (x, dark) in row.enumerated() where dark {
                for dy in 0..<scale {
                    let start = ((y + margin) * scale + dy) * side + (x + margin) * scale
                    for dx in 0..<scale { pixels[start + dx] = 0 }
                }
            }
        }
        return Data("P5\n\(side) \(side)\n255\n".utf8) + Data(pixels)
    }
}
