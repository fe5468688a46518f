import Foundation
import Testing

/// Pairing/vectors/ must be what `speakbridge-vectors` generates from the current code. The test target cannot
/// import an executable, so it runs the built generator with `--check` (path from SPEAKBRIDGE_VECTORS_BIN, else
/// `<package>/.build/debug/speakbridge-vectors`).
@Suite("Pairing/vectors are current")
struct VectorFileTests {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // SpeakBridgeProtocolTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()  // package root
        .standardizedFileURL.path

    static var generator: String {
        if let path = ProcessInfo.processInfo.environment["SPEAKBRIDGE_VECTORS_BIN"], !path.isEmpty { return path }
        return packageRoot + "/.build/debug/speakbridge-vectors"
    }

    @Test("speakbridge-vectors --check finds every file current")
    func vectorFilesAreCurrent() throws {
        let binary = Self.generator
        try #require(FileManager.default.isExecutableFile(atPath: binary),
                     "no generator at \(binary): run `swift build` first, or set SPEAKBRIDGE_VECTORS_BIN")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--check", Self.packageRoot + "/Pairing/vectors"]
        process.currentDirectoryURL = URL(fileURLWithPath: Self.packageRoot)
        let stderr = Pipe()
        process.standardError = stderr
        process.standardOutput = Pipe()
        try process.run()
        let output = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "Pairing/vectors is stale or missing:\n\(output)")
    }

    @Test("every vector file is documented", arguments: ["pairing-codes.json", "handshakes.json", "frames.json", "config.json"])
    func documented(file: String) throws {
        let readme = try String(contentsOfFile: Self.packageRoot + "/Pairing/vectors/README.md", encoding: .utf8)
        #expect(readme.contains("`\(file)`"))
    }
}
