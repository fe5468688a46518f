internal import Glibc
import SpeakBridgeProtocol

/// What a transcript's files look like, as pure functions (the sink and `speakbridge sessions` share them).
///
/// Layout of `transcript:DIR` (DIR 0700, every file 0600), one set per (device, session):
/// - `NAME.jsonl`: one `JSONLine` per chunk (device, name, session, seq, text and the optional fields), nothing
///   else. This file is the transcript's truth and its position: the last complete line holds the last seq.
/// - `NAME.md`: Markdown for a person: a title, one line saying when, which device and session, then one paragraph
///   per chunk, prefixed with `[H:MM:SS]` when the chunk has a start time and `**speaker:**` when it has a speaker.
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
        return line + "\n\n"
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
