// Loads the public Noise test vectors (Noise wiki JSON format) from ../shared/vectors/noise/ next to the package.
// One generic loader for all three files: cacophony's and snow's layout (protocol_name, init_psks) and
// noise-c's older one (name, init_psk).
import Foundation
import Testing
import SpeakBridgeCrypto

struct NoiseVectorMessage: Sendable {
    let payload: [UInt8]
    let ciphertext: [UInt8]
}

/// One replayable vector: a protocol this module implements, with every key and message decoded from hex.
struct NoiseVector: Sendable, CustomTestStringConvertible {
    let file: String
    let index: Int
    let protocolName: String
    let pattern: NoiseHandshakePattern
    let cipher: NoiseCipher
    let initPrologue: [UInt8]
    let respPrologue: [UInt8]
    let initPSKs: [[UInt8]]
    let respPSKs: [[UInt8]]
    let initStatic: [UInt8]
    let initEphemeral: [UInt8]
    let initRemoteStatic: [UInt8]
    let respStatic: [UInt8]
    let respEphemeral: [UInt8]
    let handshakeHash: [UInt8]?
    let messages: [NoiseVectorMessage]

    var testDescription: String { "\(file)#\(index) \(protocolName)" }
}

enum NoiseVectorLoader {
    /// <package root>/../shared/vectors/noise, found from this file's path.
    static let directory: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()   // SpeakBridgeCryptoTests
        .deletingLastPathComponent()   // Tests
        .deletingLastPathComponent()   // package root
        .appendingPathComponent("../shared/vectors/noise", isDirectory: true)
        .standardizedFileURL

    static var isAvailable: Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory)
            && isDirectory.boolValue
    }

    /// Every vector in every *.json file, split into the ones this module implements and the names of the rest
    /// (BLAKE2b and anything else; AESGCM ones are replayable). Returns nothing when the folder is absent; throws on malformed files.
    static func load() throws -> (replayable: [NoiseVector], skipped: [String]) {
        guard isAvailable else { return ([], []) }
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasSuffix(".json") }
            .sorted()
        var replayable: [NoiseVector] = []
        var skipped: [String] = []
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        for file in files {
            let data = try Data(contentsOf: directory.appendingPathComponent(file))
            let raw = try decoder.decode(RawFile.self, from: data)
            for (index, vector) in raw.vectors.enumerated() {
                guard let name = vector.protocolName ?? vector.name else { throw LoadError.missingName(file, index) }
                guard let (pattern, cipher) = NoiseHandshakePattern.parse(protocolName: name) else {
                    skipped.append(name)
                    continue
                }
                replayable.append(try vector.decoded(file: file, index: index, name: name, pattern: pattern,
                                                     cipher: cipher))
            }
        }
        return (replayable, skipped)
    }

    /// For `@Test(arguments:)`.
    static func replayableVectors() throws -> [NoiseVector] {
        try load().replayable
    }

    enum LoadError: Error, CustomStringConvertible {
        case missingName(String, Int)
        case badHex(String)

        var description: String {
            switch self {
            case let .missingName(file, index): return "\(file) vector \(index) has no protocol_name or name"
            case let .badHex(field): return "field \(field) is not even-length lowercase hex"
            }
        }
    }

    private struct RawFile: Decodable {
        let vectors: [RawVector]
    }

    private struct RawMessage: Decodable {
        let payload: String
        let ciphertext: String
    }

    private struct RawVector: Decodable {
        let protocolName: String?
        let name: String?
        let initPrologue: String
        let respPrologue: String
        let initPsks: [String]?
        let respPsks: [String]?
        let initPsk: String?
        let respPsk: String?
        let initStatic: String
        let initEphemeral: String
        let initRemoteStatic: String
        let respStatic: String
        let respEphemeral: String
        let handshakeHash: String?
        let messages: [RawMessage]

        func decoded(file: String, index: Int, name: String, pattern: NoiseHandshakePattern,
                     cipher: NoiseCipher) throws -> NoiseVector {
            NoiseVector(
                file: file, index: index, protocolName: name, pattern: pattern, cipher: cipher,
                initPrologue: try hex(initPrologue, "init_prologue"),
                respPrologue: try hex(respPrologue, "resp_prologue"),
                initPSKs: try (initPsks ?? initPsk.map { [$0] } ?? []).map { try hex($0, "init_psks") },
                respPSKs: try (respPsks ?? respPsk.map { [$0] } ?? []).map { try hex($0, "resp_psks") },
                initStatic: try hex(initStatic, "init_static"),
                initEphemeral: try hex(initEphemeral, "init_ephemeral"),
                initRemoteStatic: try hex(initRemoteStatic, "init_remote_static"),
                respStatic: try hex(respStatic, "resp_static"),
                respEphemeral: try hex(respEphemeral, "resp_ephemeral"),
                handshakeHash: try handshakeHash.map { try hex($0, "handshake_hash") },
                messages: try messages.map {
                    NoiseVectorMessage(payload: try hex($0.payload, "payload"),
                                       ciphertext: try hex($0.ciphertext, "ciphertext"))
                })
        }

        private func hex(_ string: String, _ field: String) throws -> [UInt8] {
            let valid = string.utf8.count % 2 == 0
                && string.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
            guard valid else { throw LoadError.badHex(field) }
            return [UInt8](hex: string)
        }
    }
}
