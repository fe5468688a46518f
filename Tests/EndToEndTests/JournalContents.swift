import Foundation

/// What a `send` journal holds: its acknowledged level and the chunks above it, in order (as `Outbox.load` reads it).
struct JournalContents {
    var acked: UInt64 = 0
    var pendingTexts: [String] = []

    init(directory: String) {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        guard let name = files.first(where: { $0.hasSuffix(".journal") }),
              let data = FileManager.default.contents(atPath: directory + "/" + name) else { return }
        var chunks: [(UInt64, String)] = []
        for line in data.split(whereSeparator: { $0 == 0x0A || $0 == 0 }) {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else { continue }
            if let level = object["acked"] as? Int { acked = max(acked, UInt64(level)) }
            if let level = object["a"] as? Int { acked = max(acked, UInt64(level)) }
            if let chunk = object["c"] as? [String: Any], let seq = chunk["seq"] as? Int, let text = chunk["text"] as? String {
                chunks.append((UInt64(seq), text))
            }
        }
        pendingTexts = chunks.filter { $0.0 > acked }.map(\.1)
    }
}
