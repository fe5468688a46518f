internal import Glibc
import SpeakBridgeProtocol
internal import SpeakBridgeSupport

/// What a transcript's files look like, as pure functions (the sink and `speakbridge sessions` share them).
///
/// Layout of `transcript:DIR` (DIR 0700, every file 0600), one set per (device, session):
/// - `NAME.jsonl`: one `JSONLine` per chunk (device, name, session, seq, text and the optional fields), nothing
///   else. This file is the transcript's truth and its position: the last complete line holds the last seq.
/// - `NAME.md`: Markdown for a person: a title, one line saying when, which device and session, then one paragraph
///   per chunk, prefixed with `[H:MM:SS]` when the chunk has a start time and `**speaker:**` when it has a speaker,
///   each closed by `<!-- seq N -->` on its own line (invisible when rendered; how a restart finds what it holds).
/// - `NAME.vtt`: WebVTT, created with the first chunk that has both start and end times; one cue per such chunk
///   (identifier = seq, `<v speaker>` when known).
/// NAME is `YYYY-MM-DD_HH-MM-SS_DEVICENAME` (UTC start time; the device name reduced to letters, digits, `.`, `-`
/// and `_`, at most 40 characters, or `device-XXXX` from the device ID), with `-2`, `-3`… when taken.
enum TranscriptFormat {
    static let maxNameLength = 40

    /// `name` reduced to a safe file-name part: letters and digits of any script, `-`, `_`, `.`; every other run of
    /// characters becomes one `_`; no leading or trailing `.`/`-`/`_` (no hidden file, no `..`, no option-like name).
    static func fileNamePart(_ name: String?, device: DeviceID) -> String {
        var out = String.UnicodeScalarView()
        var count = 0
        for scalar in (name ?? "").unicodeScalars where count < maxNameLength {
            let keep = scalar.isASCII ? (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
                                         || scalar == "-" || scalar == "." || scalar == "_")
                                      : (scalar.properties.isAlphabetic || scalar.properties.numericType != nil)
            if keep && !PeerText.needsEscape(scalar) {
                out.append(scalar)
            } else if out.last != "_" {
                out.append("_")
            }
            count += 1
        }
        let trimmed = String(out).trimmingEdges { "._-".unicodeScalars.contains($0) }
        return trimmed.isEmpty ? "device-" + device.compact.prefix(4) : trimmed
    }

    /// `YYYY-MM-DD_HH-MM-SS` in UTC.
    static func stamp(_ seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))_"
            + "\(two(parts.tm_hour))-\(two(parts.tm_min))-\(two(parts.tm_sec))"
    }

    /// "2026-11-22T16:10:05Z" (ISO 8601) from a NAME's stamp, or nil when NAME does not start with one.
    static func started(fromName name: String) -> String? {
        let bytes = Array(name.utf8.prefix(19))
        guard bytes.count == 19, bytes[10] == UInt8(ascii: "_"),
              bytes.enumerated().allSatisfy({ [4, 7, 10, 13, 16].contains($0) || (0x30...0x39).contains($1) })
        else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        return "\(text.prefix(10))T\(String(text.suffix(8).map { $0 == "-" ? ":" : $0 }))Z"
    }

    /// A peer's string on one Markdown line: sanitized, line breaks and backticks made spaces.
    static func inline(_ text: String) -> String {
        String(OutputSanitizer.sanitize(text).map { $0 == "\n" || $0 == "\t" || $0 == "`" ? " " : $0 })
    }

    static func markdownHeader(_ item: SinkItem, name: String) -> String {
        let who = item.deviceName.map(inline) ?? "device \(item.device)"
        let when = started(fromName: name).map { $0.replacingT() } ?? "?"
        return "# Dictation from \(who)\n\nStarted \(when) · device `\(item.device)` · session `\(inline(item.session))`\n\n"
    }

    static func markdownParagraph(_ item: SinkItem, sanitize: Bool) -> String {
        var line = ""
        if let start = item.chunk.start, start.isFinite { line += "[\(clock(start, millis: false))] " }
        if let speaker = item.chunk.speaker { line += "**\(inline(speaker)):** " }
        let text = sanitize ? OutputSanitizer.sanitize(item.chunk.text) : item.chunk.text
        // A blank line inside a chunk would end its paragraph early: keep it one paragraph.
        line += text.split(separator: "\n", omittingEmptySubsequences: true).joined(separator: "  \n")
        return line + "\n" + seqMarker(item.chunk.seq) + "\n\n"
    }

    /// `<!-- seq N -->`: closes every paragraph on a line of its own (an HTML comment: Markdown shows nothing).
    /// The Markdown is written after the JSONL, so the marker at its end says which chunk it holds last.
    static func seqMarker(_ seq: UInt64) -> String { "<!-- seq \(seq) -->" }

    /// The seq of the marker that ends `tail` (the last bytes of a Markdown), or nil when it does not end with one
    /// (a torn write, an edited file, a file of an older version, a title without paragraphs).
    static func lastMarkedSeq(_ tail: ArraySlice<UInt8>) -> UInt64? {
        let end = Array("-->\n\n".utf8)
        guard tail.count > end.count, tail.suffix(end.count).elementsEqual(end) else { return nil }
        let body = tail.dropLast(2)
        let line = body.lastIndex(of: 0x0A).map { body[($0 + 1)...] } ?? body[...]
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("<!-- seq "), text.hasSuffix(" -->") else { return nil }
        let digits = text.dropFirst(9).dropLast(4)
        guard !digits.isEmpty, digits.allSatisfy({ ("0"..."9").contains($0) }) else { return nil }
        return UInt64(digits)
    }

    /// What the end of a WebVTT says.
    enum CueTail: Equatable {
        case last(UInt64)  // the last cue's identifier (seq); 0 for a header without cues
        case needMore      // the last cue starts before these bytes
        case unreadable    // not whole cues (torn, edited)
    }

    /// Reads the last cue of `tail` (the last bytes of a WebVTT; `whole`: all of it). Cues hold no blank line, so
    /// the last cue starts after the last blank line before the end.
    static func lastCue(_ tail: ArraySlice<UInt8>, whole: Bool) -> CueTail {
        if whole && tail.elementsEqual(vttHeader.utf8) { return .last(0) }
        guard tail.count > 2, tail.suffix(2).elementsEqual([0x0A, 0x0A]) else { return .unreadable }
        let body = tail.dropLast(2)
        var start: Int?
        var i = body.endIndex - 1
        while i > body.startIndex {
            if body[i] == 0x0A && body[i - 1] == 0x0A { start = i + 1; break }
            i -= 1
        }
        guard let start else { return whole ? .unreadable : .needMore }
        let lines = body[start...].split(separator: 0x0A, maxSplits: 2, omittingEmptySubsequences: false)
        guard lines.count >= 2, String(decoding: lines[1], as: UTF8.self).contains(" --> "), !lines[0].isEmpty,
              lines[0].allSatisfy({ (0x30...0x39).contains($0) }),
              let seq = UInt64(String(decoding: lines[0], as: UTF8.self)) else { return .unreadable }
        return .last(seq)
    }

    static let vttHeader = "WEBVTT\n\n"

    /// A cue for a chunk with start and end, else nil.
    static func vttCue(_ item: SinkItem) -> String? {
        guard let start = item.chunk.start, let end = item.chunk.end, start.isFinite, end.isFinite else { return nil }
        let voice = item.chunk.speaker.map { "<v \(escapeVTT(inline($0)))>" } ?? ""
        let lines = OutputSanitizer.sanitize(item.chunk.text).split(separator: "\n", omittingEmptySubsequences: true)
        let text = lines.map { escapeVTT(String($0)) }.joined(separator: "\n")
        return "\(item.chunk.seq)\n\(clock(start, millis: true)) --> \(clock(max(start, end), millis: true))\n"
            + "\(voice)\(text.isEmpty ? " " : text)\n\n"
    }

    /// `&`, `<`, `>` as entities: a cue's text cannot contain "-->" or a tag then.
    static func escapeVTT(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default: out.append(character)
            }
        }
        return out
    }

    /// H:MM:SS (Markdown) or HH:MM:SS.mmm (WebVTT) for `seconds` (negative counts as 0, capped at 9999 hours).
    static func clock(_ seconds: Double, millis: Bool) -> String {
        let total = Int((min(max(seconds, 0), 36_000_000) * 1000).rounded())
        let (h, m, s, ms) = (total / 3_600_000, total / 60_000 % 60, total / 1000 % 60, total % 1000)
        func pad(_ v: Int, _ width: Int) -> String { String(repeating: "0", count: max(0, width - String(v).count)) + String(v) }
        return millis ? "\(pad(h, 2)):\(pad(m, 2)):\(pad(s, 2)).\(pad(ms, 3))" : "\(h):\(pad(m, 2)):\(pad(s, 2))"
    }
}

extension String {
    func trimmingEdges(_ drop: (Unicode.Scalar) -> Bool) -> String {
        var scalars = Substring(self).unicodeScalars[...]
        while let first = scalars.first, drop(first) { scalars.removeFirst() }
        while let last = scalars.last, drop(last) { scalars.removeLast() }
        return String(String.UnicodeScalarView(scalars))
    }

    /// "2026-11-22T16:10:05Z" → "2026-11-22 16:10:05 UTC".
    func replacingT() -> String { String(dropLast().map { $0 == "T" ? " " : $0 }) + " UTC" }
}
