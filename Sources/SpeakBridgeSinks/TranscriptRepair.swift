internal import Glibc
import SpeakBridgeProtocol

/// Brings a transcript's Markdown and WebVTT up to its JSONL by appending what they miss, reading only tails.
///
/// Why it is enough: the sink appends a chunk's JSONL line (fsynced) first, then its cue to the WebVTT, then its
/// paragraph to the Markdown, each closed by `<!-- seq N -->`. So after a crash or a failed write the files hold
/// prefixes: JSONL ⊇ WebVTT ⊇ Markdown, and what they miss are the chunks after the Markdown's last marker.
///
/// Flow: the Markdown's last marker (its tail) → the JSONL's lines after that seq (a tail read backwards until a
/// line at or below it) → the WebVTT's last cue (its tail) → append the missing cues, then the missing paragraphs
/// (each fsynced; a failed write is cut back). Returns false, having written nothing, when a tail cannot be
/// understood (a torn or edited file, a Markdown of an older version, a marker the JSONL does not reach): the
/// caller then rebuilds the files in full.
enum TranscriptRepair {
    static func appendMissing(directory: String, name: String, sanitize: Bool) throws(SinkError) -> Bool {
        let mdPath = "\(directory)/\(name).md"
        let jsonlPath = "\(directory)/\(name).jsonl"
        guard let md = try? TranscriptDirectory.openChecked(mdPath, O_RDWR | O_APPEND) else { return false }
        defer { Glibc.close(md) }
        let (mdTail, _) = try TranscriptDirectory.tail(md, path: mdPath) { _ in true }
        guard let marked = TranscriptFormat.lastMarkedSeq(mdTail) else { return false }

        let jsonl = try TranscriptDirectory.openChecked(jsonlPath, O_RDONLY)
        defer { Glibc.close(jsonl) }
        var missing: [SinkItem] = []
        var reached = false  // a line at or below the marker was read: everything after it is in `missing`
        let (jsonlTail, whole) = try TranscriptDirectory.tail(jsonl, path: jsonlPath) { bytes in
            // Complete lines only: the first one in a window may be cut.
            bytes.split(separator: 0x0A).dropFirst().contains { (JSONLine.decode($0)?.chunk.seq ?? .max) <= marked }
        }
        guard jsonlTail.last == 0x0A else { return false }  // empty, or torn (the scan cuts torn lines off)
        let lines = jsonlTail.split(separator: 0x0A).dropFirst(whole ? 0 : 1)
        var newest: UInt64?
        for line in lines.reversed() {
            guard let item = JSONLine.decode(line) else { continue }  // as the full rebuild: undecodable lines skipped
            if newest == nil { newest = item.chunk.seq }
            if item.chunk.seq <= marked { reached = true; break }
            missing.append(item)
        }
        missing.reverse()
        // The marker must be a chunk of this JSONL, not beyond its end (else the Markdown was edited): rebuild.
        guard reached, let newest, newest >= marked else { return false }
        guard !missing.isEmpty else { return true }

        let cues = missing.filter { TranscriptFormat.vttCue($0) != nil }
        if !cues.isEmpty, try !appendCues(cues, path: "\(directory)/\(name).vtt") { return false }
        let paragraphs = missing.map { TranscriptFormat.markdownParagraph($0, sanitize: sanitize) }.joined()
        try TranscriptDirectory.write(md, Array(paragraphs.utf8), path: mdPath, sync: true)
        return true
    }

    /// Appends the cues of `items` the WebVTT does not hold yet (those after its last cue); creates it when missing.
    private static func appendCues(_ items: [SinkItem], path: String) throws(SinkError) -> Bool {
        var fd = TranscriptDirectory.create(path)
        var last: UInt64 = 0
        var text = ""
        if fd >= 0 {
            text = TranscriptFormat.vttHeader
        } else {
            guard errno == EEXIST, let open = try? TranscriptDirectory.openChecked(path, O_RDWR | O_APPEND) else {
                return false
            }
            fd = open
            let (tail, whole) = try TranscriptDirectory.tail(fd, path: path) {
                TranscriptFormat.lastCue($0, whole: false) != .needMore
            }
            if whole && tail.isEmpty {
                text = TranscriptFormat.vttHeader  // created, then the crash came before its first bytes
            } else {
                guard case .last(let seq) = TranscriptFormat.lastCue(tail, whole: whole) else {
                    Glibc.close(fd)
                    return false
                }
                last = seq
            }
        }
        defer { Glibc.close(fd) }
        text += items.filter { $0.chunk.seq > last }.compactMap(TranscriptFormat.vttCue).joined()
        guard !text.isEmpty else { return true }
        try TranscriptDirectory.write(fd, Array(text.utf8), path: path, sync: true)
        return true
    }
}
