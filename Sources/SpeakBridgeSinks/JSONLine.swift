import SpeakBridgeProtocol

/// The one framed line format, shared by the `jsonl:` FIFO and a transcript's `NAME.jsonl` companion: one JSON
/// object per chunk, keys in this order, then "\n" and nothing else:
///
///     {"device":"SB1-…","name":"Pixel 8","session":"s1","seq":12,"text":"hello","lang":"en","speaker":"A","start":1.5,"end":2.25}
///
/// - `device` (the DeviceID text), `session`, `seq` and `text` are always there; `name` when the desktop knows the
///   device's name; `lang`, `speaker`, `start`, `end` only when the chunk has them.
/// - `text` is sanitized like the `fifo:` sink (`OutputSanitizer`, unless `--raw`), then JSON-escaped: a line feed
///   inside a chunk is `\n` in the JSON, so a raw line feed only ever ends an object. Every string is escaped with
///   `JSONValue`'s writer: `"` `\` and controls, plus DEL, C1, bidi controls and U+2028/9 as `\uXXXX`.
/// - Because `"` inside a string is always escaped, the bytes `{"device":` occur only where an object starts: a
///   reader that finds a line that is not one JSON object (a torn line from a writer killed in the middle of a
///   line longer than 4096 bytes) parses from the last `{"device":` in it.
enum JSONLine {
    static func encode(_ item: SinkItem, sanitize: Bool) -> [UInt8] {
        let chunk = item.chunk
        var members: [(String, JSONValue)] = [("device", .string(item.device.description))]
        if let name = item.deviceName { members.append(("name", .string(name))) }
        members.append(("session", .string(item.session)))
        members.append(("seq", .integer(Int64(clamping: chunk.seq))))
        members.append(("text", .string(sanitize ? OutputSanitizer.sanitize(chunk.text) : chunk.text)))
        if let lang = chunk.lang { members.append(("lang", .string(lang))) }
        if let speaker = chunk.speaker { members.append(("speaker", .string(speaker))) }
        if let start = chunk.start, start.isFinite { members.append(("start", .double(start))) }
        if let end = chunk.end, end.isFinite { members.append(("end", .double(end))) }
        return JSONValue.object(members).encoded() + [0x0A]
    }
}

extension JSONLine {
    /// Reads one line back (without its "\n"); nil when it is not a complete object of this format.
    static func decode(_ line: some Collection<UInt8>) -> SinkItem? {
        guard let object = try? JSONValue.parse(Array(line), maxDepth: 2, maxBytes: 1 << 22),
              let deviceText = object["device"]?.stringValue, let device = try? DeviceID(parsing: deviceText),
              let session = object["session"]?.stringValue, let seq = object["seq"]?.int64Value, seq >= 0,
              let text = object["text"]?.stringValue else { return nil }
        let chunk = Chunk(seq: UInt64(seq), text: text, lang: object["lang"]?.stringValue,
                          speaker: object["speaker"]?.stringValue, start: object["start"]?.doubleValue,
                          end: object["end"]?.doubleValue)
        return SinkItem(device: device, deviceName: object["name"]?.stringValue, session: session, chunk: chunk)
    }
}
