import SpeakBridgeSupport

/// Turns `Message` values into the JSON bytes of PROTOCOL.md and back.
///
/// Parser rules (each stops an attack or a bug class): the document is at most one frame and nests at most
/// 8 levels (memory and stack exhaustion); `type` is required and must be a string; unknown fields are ignored
/// (forward compatibility) but unknown types are an error the peer is told about; session IDs are 1–64 characters
/// of `[A-Za-z0-9._-]` (they become file names in logs and state); sequence numbers are 1…2^53 (exact in every
/// JSON implementation); chunk text is at most 16 KiB of UTF-8; names at most 64 bytes.
public enum MessageCodec {
    /// The longest `message` of an `error` a peer accepts, in bytes of UTF-8 (PROTOCOL.md, "Errors").
    public static let maxErrorMessageBytes = 1024

    public static func encode(_ message: Message) -> [UInt8] {
        switch message {
        case let .chunks(session, chunks):
            // The hot path: written straight into bytes, byte for byte what `json(message).encoded()` writes
            // (tested), without building a JSONValue tree per chunk (its allocations and reference counting were
            // most of `send`'s CPU in a burst).
            // Room for every chunk's members and unescaped text, and for the tag sealing appends in place
            // (`InitiatorMachine.seal`): a burst's 512-chunk batch grew (and was copied) several times, the last
            // time for the tag.
            // By index: iterating copies every chunk (and releases it), a few hundred instructions a chunk.
            var textBytes = 0
            for i in chunks.indices { textBytes &+= chunks[i].textUTF8Count }
            var out: [UInt8] = []
            out.reserveCapacity(64 + session.utf8.count + chunks.count * 64 + textBytes + 16)
            out += Self.chunksPrefix
            JSONValue.writeString(session, into: &out)
            out += Self.chunksArrayKey
            for i in chunks.indices {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeChunk(chunks[i], into: &out)
            }
            out += [UInt8(ascii: "]"), UInt8(ascii: "}")]
            return out
        case let .chunk(session, chunk):
            return encodeChunk(chunk, envelope: chunkEnvelope(session: session))
        default:
            return json(message).encoded()
        }
    }

    /// `{"type":"chunk","session":"…",`: a `chunk` message up to its chunk's members (`encodeChunk`).
    package static func chunkEnvelope(session: String) -> [UInt8] {
        var out = Self.chunkPrefix
        JSONValue.writeString(session, into: &out)
        out.append(UInt8(ascii: ","))
        return out
    }

    /// A `chunk` message: `envelope` (`chunkEnvelope` of its session), the chunk's members, `}`; with room for the
    /// tag sealing appends in place.
    package static func encodeChunk(_ chunk: Chunk, envelope: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        let encodedCount = chunk.encodedCount
        out.reserveCapacity(envelope.count + (encodedCount > 0 ? encodedCount : 96 + chunk.textUTF8Count) + 16)
        out += envelope
        if let encoded = chunk.encoded {
            // The members, without the object's braces (by index: `dropLast` on a slice is Sequence's, which
            // builds an array element by element).
            out += encoded[(encoded.startIndex + 1)..<(encoded.endIndex - 1)]
        } else {
            writeChunkMembers(chunk, into: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    static let chunksPrefix = Array(#"{"type":"chunks","session":"#.utf8)
    static let chunksArrayKey = Array(#","chunks":["#.utf8)
    static let chunkPrefix = Array(#"{"type":"chunk","session":"#.utf8)

    /// One chunk object, as `JSONValue.object(chunkFields(c)).encoded()` writes it (same members, same order); the
    /// chunk's `encoded` bytes when it has them (the same bytes, written once by the journal).
    public static func writeChunk(_ c: Chunk, into out: inout [UInt8]) {
        if let encoded = c.encoded {
            out += encoded
            return
        }
        writeChunkMembers(c, headSkip: Self.braceSkip, into: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// The members of one chunk, without braces (with `brace`, the opening one first).
    static func writeChunkMembers(_ c: Chunk, brace: Bool = false, into out: inout [UInt8]) {
        writeChunkMembers(c, headSkip: brace ? Self.braceSkip : Self.membersSkip, into: &out)
    }

    /// `writeChunkMembers`, led by `recordHead` from `headSkip` on (see `writeHead`).
    static func writeChunkMembers(_ c: Chunk, headSkip: Int, into out: inout [UInt8]) {
        writeHead(seq: c.seq, skip: headSkip, into: &out)
        c.withTextUTF8 { JSONValue.writeEscaped($0, into: &out) }
        out += c.final ? Self.finalTrue : Self.finalFalse
        if c.hasExtras {
            // Rare members: through the general writer, in `chunkMembers` order.
            for (key, value) in chunkMembers(c).dropFirst(3) {
                out.append(UInt8(ascii: ","))
                JSONValue.writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                value.write(into: &out)
            }
        }
    }

    /// A journal record's head (`Outbox`): `{"c":` and the chunk object's opening `{"seq":`. `writeHead` writes it
    /// from `braceSkip` (`{"seq":`) or `membersSkip` (`"seq":`) on; `braceSkip` is also where a record's chunk
    /// object starts (`lineRecords`).
    static let recordHead: StaticString = #"{"c":{"seq":"#
    static let braceSkip = 5
    static let membersSkip = 6

    /// `{"seq":N,"text":"` (with or without the brace: `recordHead` from `skip` on) in one append: built on the
    /// stack, instead of three appends of constant arrays and a digit writer's (about 450 instructions a chunk in a
    /// burst). The text's opening quote rides on it (`JSONValue.writeString` without its two appends).
    static func writeHead(seq: UInt64, skip: Int, into out: inout [UInt8]) {
        let head = Self.recordHead
        let textKey: StaticString = #","text":""#
        // 12 + at most 20 digits + 9.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 48) { buffer in
            let base = buffer.baseAddress!
            var end = head.utf8CodeUnitCount - skip
            base.update(from: head.utf8Start + skip, count: end)
            let digits = decimalDigits(seq)
            var rest = seq
            var i = end + digits
            repeat {
                i -= 1
                base[i] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest > 0
            end += digits
            (base + end).update(from: textKey.utf8Start, count: textKey.utf8CodeUnitCount)
            end += textKey.utf8CodeUnitCount
            out.append(contentsOf: UnsafeBufferPointer(start: base, count: end))
        }
    }

    /// How many decimal digits `value` has.
    static func decimalDigits(_ value: UInt64) -> Int {
        var digits = 1
        var rest = value
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        return digits
    }

    static let finalTrue = Array(#"","final":true"#.utf8)
    static let finalFalse = Array(#"","final":false"#.utf8)

    public static func json(_ message: Message) -> JSONValue {
        var m: [(String, JSONValue)] = [("type", .string(message.type))]
        switch message {
        case .pair(let name):
            m.append(("name", .string(name)))
        case let .pairAccept(name, id):
            m.append(("name", .string(name)))
            m.append(("id", .string(id)))
        case .pairConfirm, .paired, .welcome, .bye:
            break
        case .hello(let agent):
            m.append(("agent", .string(agent)))
        case let .resume(session, delivered):
            m.append(("session", .string(session)))
            if let delivered { m.append(("delivered", .integer(Int64(delivered)))) }
        case let .chunk(session, chunk):
            m.append(("session", .string(session)))
            m += chunkMembers(chunk)
        case let .chunks(session, chunks):
            m.append(("session", .string(session)))
            m.append(("chunks", .array(chunks.map { .object(chunkMembers($0)) })))
        case let .ack(session, seq):
            m.append(("session", .string(session)))
            m.append(("seq", .integer(Int64(seq))))
        case let .error(code, text, expected):
            m.append(("code", .string(code.rawValue)))
            m.append(("message", .string(text)))
            if let expected { m.append(("expected", .integer(Int64(expected)))) }
        case .held(let notice):
            m.append(("session", .string(notice.session)))
            m.append(("seq", .integer(Int64(notice.seq))))
            m.append(("sink", .string(notice.sink)))
            m.append(("reason", .string(notice.reason)))
        case .config(_, let body):
            if case .object(let members) = body { m += members.filter { $0.0 != "type" } }
        }
        return .object(m)
    }

    /// An upper bound of the encoded size of one chunk object, computed without encoding it.
    public static func encodedSizeBound(_ c: Chunk) -> Int {
        let encodedCount = c.encodedCount
        if encodedCount > 0, !c.hasExtras { return sizeBound(encodedCount: encodedCount, final: c.final, seq: c.seq) }
        var size = 64  // {"seq":…,"text":"","final":false} with a 16-digit seq
        // Exact for the text (the C1 and bidi controls are written as \uXXXX: 6 bytes for 2 or 3 of UTF-8).
        size += c.withTextUTF8 { JSONValue.escapedSize(utf8: $0) }
        if let lang = c.lang { size += 12 + lang.utf8.count * 6 }
        if let speaker = c.speaker { size += 14 + speaker.utf8.count * 6 }
        if c.start != nil { size += 34 }
        if c.end != nil { size += 32 }
        return size
    }

    /// `encodedSizeBound` of a chunk without rare members whose encoded object is `encodedCount` bytes: the escaped
    /// text's size read off the object, `{"seq":` N `,"text":"` TEXT `","final":true}` (or `false}`), instead of
    /// scanning the text again: the same bound.
    static func sizeBound(encodedCount: Int, final: Bool, seq: UInt64) -> Int {
        64 + encodedCount - (final ? 31 : 32) - decimalDigits(seq)
    }

    /// The JSON members of one chunk (as inside `chunks`), for journals and size estimates.
    public static func chunkFields(_ c: Chunk) -> [(String, JSONValue)] { chunkMembers(c) }

    /// Parses one chunk object (as inside `chunks`).
    public static func decodeChunk(_ v: JSONValue) throws(MessageError) -> Chunk { try chunk(v) }

    static func chunkMembers(_ c: Chunk) -> [(String, JSONValue)] {
        var m: [(String, JSONValue)] = [("seq", .integer(Int64(c.seq))), ("text", .string(c.text)), ("final", .bool(c.final))]
        if let lang = c.lang { m.append(("lang", .string(lang))) }
        if let speaker = c.speaker { m.append(("speaker", .string(speaker))) }
        if let start = c.start { m.append(("start", .double(start))) }
        if let end = c.end { m.append(("end", .double(end))) }
        return m
    }

    public static func decode(_ bytes: [UInt8]) throws(MessageError) -> Message {
        if let message = decodeCanonical(bytes) { return message }  // chunks as `encode` writes them
        return try decodeGeneral(bytes)
    }

    /// Any message, through the JSONValue tree: every rule checked, every error worded.
    static func decodeGeneral(_ bytes: [UInt8]) throws(MessageError) -> Message {
        let value: JSONValue
        do {
            value = try JSONValue.parse(bytes, maxDepth: 8, maxBytes: SpeakBridgeProtocol.maxFrameSize)
        } catch {
            throw .malformed(error.description)
        }
        guard case .object = value else { throw .malformed("not a JSON object") }
        guard let type = value["type"]?.stringValue else { throw .malformed("missing \"type\"") }
        switch type {
        case "pair":
            return .pair(name: try name(value["name"]))
        case "pair-accept":
            return .pairAccept(name: try name(value["name"]), id: try string(value["id"], "id", maxBytes: 64))
        case "pair-confirm": return .pairConfirm
        case "paired": return .paired
        case "hello":
            return .hello(agent: try optionalString(value["agent"], "agent", maxBytes: 128) ?? "")
        case "welcome": return .welcome
        case "resume":
            let delivered = try value["delivered"].flatMap { v throws(MessageError) in
                v == .null ? nil : try seqNumber(v, "delivered", allowZero: true)
            }
            return .resume(session: try session(value["session"]), delivered: delivered)
        case "chunk":
            return .chunk(session: try session(value["session"]), try chunk(value))
        case "chunks":
            guard let items = value["chunks"]?.arrayValue else { throw .malformed("\"chunks\" must be an array") }
            guard !items.isEmpty else { throw .malformed("\"chunks\" is empty") }
            guard items.count <= SpeakBridgeProtocol.maxChunksPerBatch else {
                throw .tooLarge("more than \(SpeakBridgeProtocol.maxChunksPerBatch) chunks in one batch")
            }
            var chunks: [Chunk] = []
            chunks.reserveCapacity(items.count)
            for item in items {
                guard case .object = item else { throw .malformed("chunk is not an object") }
                chunks.append(try chunk(item))
            }
            for (a, b) in zip(chunks, chunks.dropFirst()) where b.seq != a.seq + 1 {
                throw .malformed("sequence numbers in a batch must be consecutive")
            }
            return .chunks(session: try session(value["session"]), chunks)
        case "ack":
            return .ack(session: try session(value["session"]), seq: try seqNumber(value["seq"] ?? .null, "seq", allowZero: true))
        case "bye": return .bye
        case "error":
            let code = try string(value["code"], "code", maxBytes: 64)
            let text = try optionalString(value["message"], "message", maxBytes: maxErrorMessageBytes) ?? ""
            let expected = try value["expected"].flatMap { v throws(MessageError) in
                v == .null ? nil : try seqNumber(v, "expected", allowZero: false)
            }
            return .error(code: ProtocolErrorCode(rawValue: code), message: text, expected: expected)
        case "held":
            let sink = try string(value["sink"], "sink", maxBytes: HeldNotice.maxSinkBytes)
            let reason = try string(value["reason"], "reason", maxBytes: HeldNotice.maxReasonBytes)
            return .held(HeldNotice(session: try session(value["session"]),
                                    seq: try seqNumber(value["seq"] ?? .null, "seq", allowZero: false),
                                    sink: sink, reason: reason))
        case _ where type.hasPrefix("config-") && type.utf8.count <= 32:
            return .config(type: type, body: value)
        default:
            throw .unknownType(PeerText.utf8Prefix(type, maxBytes: 64))
        }
    }

    /// The `type` of a message that did not decode, when its bytes are a JSON object with a string `type`:
    /// tells a malformed `error` (which closes the session) from other malformed messages (which are answered).
    public static func typeOfUndecodable(_ bytes: [UInt8]) -> String? {
        guard let value = try? JSONValue.parse(bytes, maxDepth: 8, maxBytes: SpeakBridgeProtocol.maxFrameSize)
        else { return nil }
        return value["type"]?.stringValue
    }

    // MARK: field rules

    static let maxSeq: UInt64 = 1 << 53

    static func string(_ v: JSONValue?, _ field: String, maxBytes: Int) throws(MessageError) -> String {
        guard let s = v?.stringValue else { throw .malformed("\"\(field)\" must be a string") }
        guard s.utf8.count <= maxBytes else { throw .tooLarge("\"\(field)\" longer than \(maxBytes) bytes") }
        return s
    }

    static func optionalString(_ v: JSONValue?, _ field: String, maxBytes: Int) throws(MessageError) -> String? {
        guard let v, v != .null else { return nil }
        return try string(v, field, maxBytes: maxBytes)
    }

    static func name(_ v: JSONValue?) throws(MessageError) -> String {
        try optionalString(v, "name", maxBytes: SpeakBridgeProtocol.maxNameBytes) ?? ""
    }

    public static func isValidSessionID(_ s: String) -> Bool {
        guard (1...64).contains(s.utf8.count) else { return false }
        return s.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: "-")
        }
    }

    static func session(_ v: JSONValue?) throws(MessageError) -> String {
        guard let s = v?.stringValue, isValidSessionID(s) else {
            throw .malformed("\"session\" must be 1-64 characters of A-Z a-z 0-9 . _ -")
        }
        return s
    }

    static func seqNumber(_ v: JSONValue, _ field: String, allowZero: Bool) throws(MessageError) -> UInt64 {
        guard let i = v.int64Value, i >= (allowZero ? 0 : 1), UInt64(i) <= maxSeq else {
            throw .malformed("\"\(field)\" must be an integer in \(allowZero ? 0 : 1)...2^53")
        }
        return UInt64(i)
    }

    static func chunk(_ v: JSONValue) throws(MessageError) -> Chunk {
        guard let seqValue = v["seq"] else { throw .malformed("chunk without \"seq\"") }
        let seq = try seqNumber(seqValue, "seq", allowZero: false)
        let text = try string(v["text"], "text", maxBytes: SpeakBridgeProtocol.maxChunkTextBytes)
        var final = true
        if let f = v["final"], f != .null {
            guard let b = f.boolValue else { throw .malformed("\"final\" must be a boolean") }
            final = b
        }
        func time(_ key: String) throws(MessageError) -> Double? {
            guard let t = v[key], t != .null else { return nil }
            guard let d = t.doubleValue, d >= 0 else { throw .malformed("\"\(key)\" must be a number of seconds >= 0") }
            return d
        }
        return Chunk(seq: seq, text: text, final: final,
                     lang: try optionalString(v["lang"], "lang", maxBytes: 35),
                     speaker: try optionalString(v["speaker"], "speaker", maxBytes: 64),
                     start: try time("start"), end: try time("end"))
    }
}
