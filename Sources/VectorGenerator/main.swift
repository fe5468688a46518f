// speakbridge-vectors: writes (or checks) the protocol test vectors in Pairing/vectors/.
//
//   speakbridge-vectors [DIR]          write pairing-codes.json, handshakes.json, frames.json, config.json into DIR
//                                      (default Pairing/vectors)
//   speakbridge-vectors --check [DIR]  regenerate in memory and compare; exit 1 with a summary if any file differs
//
// Everything is computed by the package's own SpeakBridgeProtocol and SpeakBridgeCrypto (and SpeakBridgeConfig for
// config.json, on a store in a temporary directory) from fixed keys
// (see Pairing/vectors/README.md), so the output is the same on every run and every machine.
import Foundation

let usage = "usage: speakbridge-vectors [--check] [DIR]"
var arguments = Array(CommandLine.arguments.dropFirst())
var check = false
if let i = arguments.firstIndex(of: "--check") {
    check = true
    arguments.remove(at: i)
}
if arguments.contains(where: { $0.hasPrefix("-") }) || arguments.count > 1 {
    FileHandle.standardError.write(Data("speakbridge-vectors: error: \(usage)\n".utf8))
    exit(2)
}
let directory = arguments.first ?? "Pairing/vectors"

do {
    let files = try VectorFiles.generate()
    if check {
        let problems = VectorFiles.check(files, in: directory)
        if problems.isEmpty {
            print("speakbridge-vectors: \(files.count) files in \(directory) are current")
        } else {
            for p in problems { FileHandle.standardError.write(Data("speakbridge-vectors: \(p)\n".utf8)) }
            FileHandle.standardError.write(Data(
                "speakbridge-vectors: hint: regenerate with `swift run speakbridge-vectors \(directory)`\n".utf8))
            exit(1)
        }
    } else {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (name, text) in files {
            try Data(text.utf8).write(to: URL(fileURLWithPath: directory + "/" + name))
        }
        print("speakbridge-vectors: wrote \(files.map(\.0).joined(separator: ", ")) in \(directory)")
    }
} catch {
    FileHandle.standardError.write(Data("speakbridge-vectors: error: \(error)\n".utf8))
    exit(1)
}
