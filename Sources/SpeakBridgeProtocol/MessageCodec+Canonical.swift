/// The hot path of `MessageCodec.decode`: a `chunk` or `chunks` message exactly in the form `encode` writes it
/// (members in its order, no whitespace, no optional chunk members), read straight into a `Message` without a
/// JSONValue tree. Building that tree (an array of members per chunk, its metadata and reference counting) was
/// most of the daemon's CPU per chunk in a burst.
///
/// It only ever accepts: anything it does not recognise, or that breaks a rule, returns nil and the general
/// parser decides (and words the error). What it accepts is a subset of what the general parser accepts, with the
/// same rules checked (size, session ID, seq range, text length and UTF-8, batch count, consecutive seqs), and
/// it yields the same message (tested differentially, also on mutated inputs).
extension MessageCodec {
    static func decodeCanonical(_ bytes: [UInt8]) -> Message? {
        guard bytes.count <= SpeakBridgeProtocol.maxFrameSize else { return nil }
        var reader = CanonicalReader(parser: JSONParser(bytes: bytes, maxDepth: 8))
        let batch: Bool
        if reader.literal(chunksPrefix) {
            batch = true
        } else if reader.literal(chunkPrefix) {
            batch = false
        } else {
            return nil
        }
        guard let session = reader.string(), isValidSessionID(session) else { return nil }
        guard batch else {
            guard reader.literal(comma), let chunk = reader.chunkMembers(), reader.literal(closeBrace),
                  reader.atEnd else { return nil }
            return .chunk(session: session, chunk)
        }
        guard reader.literal(chunksArrayKey) else { return nil }
        var chunks: [Chunk] = []
        while true {
            guard chunks.count < SpeakBridgeProtocol.maxChunksPerBatch, reader.literal(openBrace),
                  let chunk = reader.chunkMembers(), reader.literal(closeBrace) else { return nil }
            if let last = chunks.last, chunk.seq != last.seq + 1 { return nil }
            chunks.append(chunk)
            if reader.literal(comma) { continue }
            guard reader.literal(closeArrayAndObject), reader.atEnd else { return nil }
            return .chunks(session: session, chunks)
        }
    }

    static let comma: [UInt8] = [UInt8(ascii: ",")]
    static let openBrace: [UInt8] = [UInt8(ascii: "{")]
    static let closeBrace: [UInt8] = [UInt8(ascii: "}")]
    static let closeArrayAndObject: [UInt8] = [UInt8(ascii: "]"), UInt8(ascii: "}")]
}

/// A cursor over one canonical message; every method consumes only on success.
struct CanonicalReader {
    var parser: JSONParser

    var atEnd: Bool { parser.index == parser.bytes.count }

    mutating func literal(_ expected: [UInt8]) -> Bool {
        let start = parser.index
        guard parser.bytes.count - start >= expected.count else { return false }
        for k in 0..<expected.count where parser.bytes[start + k] != expected[k] { return false }
        parser.index = start + expected.count
        return true
    }

    /// A JSON string (escapes, UTF-8 and control characters checked by the general parser's own routine).
    mutating func string() -> String? {
        guard parser.index < parser.bytes.count, parser.bytes[parser.index] == UInt8(ascii: "\"") else { return nil }
        return try? parser.parseString()
    }

    /// `"seq":N,"text":"…","final":true|false`, with the codec's rules: seq 1…2^53 written without leading zeros
    /// (at most 16 digits), text at most `maxChunkTextBytes` of UTF-8.
    mutating func chunkMembers() -> Chunk? {
        guard literal(MessageCodec.seqKey) else { return nil }
        let bytes = parser.bytes
        let start = parser.index
        var seq: UInt64 = 0
        while parser.index < bytes.count, bytes[parser.index] >= UInt8(ascii: "0"), bytes[parser.index] <= UInt8(ascii: "9") {
            guard parser.index - start < 16 else { return nil }  // 2^53 has 16 digits: no overflow below
            seq = seq * 10 + UInt64(bytes[parser.index] - UInt8(ascii: "0"))
            parser.index += 1
        }
        guard parser.index > start, bytes[start] != UInt8(ascii: "0"), seq <= MessageCodec.maxSeq else { return nil }
        guard literal(MessageCodec.textKey), let text = string(),
              text.utf8.count <= SpeakBridgeProtocol.maxChunkTextBytes else { return nil }
        let final: Bool
        if literal(MessageCodec.finalTrue) {
            final = true
        } else if literal(MessageCodec.finalFalse) {
            final = false
        } else {
            return nil
        }
        return Chunk(seq: seq, text: text, final: final)
    }
}
