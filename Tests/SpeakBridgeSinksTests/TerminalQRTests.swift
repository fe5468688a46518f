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
