// The files and the comparison behind `--check`.
import Foundation

enum VectorFiles {
    /// (file name, content), in a fixed order.
    static func generate() throws -> [(String, String)] {
        [
            ("pairing-codes.json", PrettyJSON.render(try PairingCodeVectors.document())),
            ("handshakes.json", PrettyJSON.render(try HandshakeVectors.document())),
            ("frames.json", PrettyJSON.render(try FrameVectors.document())),
            ("config.json", PrettyJSON.render(try ConfigVectors.document())),
            ("handshakes-aesgcm.json", PrettyJSON.render(try AESGCMHandshakeVectors.document())),
        ]
    }

    /// One line per file that is missing or differs, naming the first differing line.
    static func check(_ files: [(String, String)], in directory: String) -> [String] {
        var problems: [String] = []
        for (name, expected) in files {
            let path = directory + "/" + name
            guard let data = FileManager.default.contents(atPath: path) else {
                problems.append("\(path): missing")
                continue
            }
            let actual = String(decoding: data, as: UTF8.self)
            guard actual != expected else { continue }
            let a = actual.split(separator: "\n", omittingEmptySubsequences: false)
            let e = expected.split(separator: "\n", omittingEmptySubsequences: false)
            let first = (0..<min(a.count, e.count)).first { a[$0] != e[$0] } ?? min(a.count, e.count)
            let differing = zip(a, e).filter { $0 != $1 }.count + abs(a.count - e.count)
            var line = "\(path): differs from the generator (\(differing) line(s), first at line \(first + 1))"
            if first < e.count { line += "\n  expected: \(e[first].prefix(120))" }
            if first < a.count { line += "\n  found:    \(a[first].prefix(120))" }
            problems.append(line)
        }
        return problems
    }
}
