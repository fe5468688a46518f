/// The hot path of `MessageCodec.decode`: a `chunk` or `chunks` message exactly in the form `encode` writes it
/// (members in its order, no whitespace, no optional chunk members), read straight into a `Message` without a
/// JSONValue tree. Building that tree (an array of members per chunk, its metadata and reference counting) was
/// most of the daemon's CPU per chunk in a burst.
///
/// It only ever accepts: anything it does not recognise, or that breaks a rule, returns nil and the general
/// parser decides (and words the error). What it accepts is a subset of what the general parser accepts, with the
/// same rules checked (size, session ID, seq range, text length and UTF-8, batch count, consecutive seqs), and
/// it yields the same message (tested differentially, also on mutated inputs).
///
/// It reads the frame's bytes in place (one borrowed buffer, no intermediate arrays, no reference counting per
/// literal). A text without escapes is checked (UTF-8, length) on those bytes and stays there: the chunk holds the
/// frame and a range of it, and no `String` is made for it (making and freeing one per line was about a fifth of
/// the desktop's instructions per burst line). A string with an escape goes through the general parser's own
/// string routine, so escapes follow exactly one set of rules.
extension MessageCodec {
    /// - Parameter knownSession: a session ID a canonical decode returned (so a valid one), which the caller
    ///   holds (its connection's last one): when the message's
    ///   session has exactly its bytes, the message carries that `String` itself, not a new one (no allocation,
    ///   and later comparisons with it, in the ledger's and the pipeline's tables, find the same storage at once).
    static func decodeCanonical(_ bytes: [UInt8], knownSession: String? = nil) -> Message? {
        guard bytes.count <= SpeakBridgeProtocol.maxFrameSize else { return nil }
        return bytes.withUnsafeBufferPointer { buffer in
            var reader = CanonicalReader(bytes: buffer, array: bytes)
            reader.knownSession = knownSession
            return reader.message()
        }
    }
}

/// A cursor over one canonical message; every method consumes only on success. Every read is bounds-checked
/// against `bytes.count` before it happens (the buffer is the peer's frame).
struct CanonicalReader {
    /// The frame, borrowed for the duration of `MessageCodec.decodeCanonical` (`withUnsafeBufferPointer`).
    let bytes: UnsafeBufferPointer<UInt8>
    /// The same bytes as an array, only for a string with escapes (the general parser's routine reads arrays).
    let array: [UInt8]
    var index = 0
    /// A session ID to hand back instead of a new `String` when the message's has the same bytes.
    var knownSession: String?

    init(bytes: UnsafeBufferPointer<UInt8>, array: [UInt8]) {
        self.bytes = bytes
        self.array = array
    }

    var atEnd: Bool { index == bytes.count }

    mutating func message() -> Message? {
        let batch: Bool
        if literal(#"{"type":"chunks","session":"#) {
            batch = true
        } else if literal(#"{"type":"chunk","session":"#) {
            batch = false
        } else {
            return nil
        }
        guard let session = sessionID() else { return nil }
        guard batch else {
            guard literal(","), let chunk = chunkMembers(), literal("}"), atEnd else { return nil }
            return .chunk(session: session, chunk)
        }
        guard literal(#","chunks":["#) else { return nil }
        var chunks: [Chunk] = []
        // Room for every chunk the rest of the frame can hold at the size of the first one (most batches are
        // lines of about the same length): growing the array by doubling cost about 50 instructions a chunk.
        // Bounded by the batch limit, so a hostile frame reserves no more than the limit allows anyway.
        let firstStart = index
        while true {
            // Each chunk is made right in the array (`appendChunk`): no `Chunk?` returned, copied and destroyed.
            guard chunks.count < SpeakBridgeProtocol.maxChunksPerBatch, literal("{"),
                  appendChunk(to: &chunks), literal("}") else { return nil }
            let count = chunks.count
            // seq ≤ 2^53 (checked in `chunkMembers`), so `+ 1` cannot overflow.
            if count > 1, chunks[count - 1].seq != chunks[count - 2].seq + 1 { return nil }
            if count == 1 {
                let each = max(index - firstStart, 1)
                chunks.reserveCapacity(min(SpeakBridgeProtocol.maxChunksPerBatch, 1 + (bytes.count - index) / each))
            }
            if literal(",") { continue }
            guard literal("]}"), atEnd else { return nil }
            return .chunks(session: session, chunks)
        }
    }

    /// Consumes `expected` if the bytes at the cursor are exactly it. A `StaticString` is a pointer into the
    /// binary's constants: no array, no `swift_once`, no retain per call; compared eight bytes at a time.
    @inline(__always)
    mutating func literal(_ expected: StaticString) -> Bool {
        let count = expected.utf8CodeUnitCount
        guard bytes.count - index >= count, let base = bytes.baseAddress else { return false }
        // Both reads stay inside their buffers: `count` bytes from `index` are in the frame (checked above).
        let have = UnsafeRawPointer(base + index)
        let want = UnsafeRawPointer(expected.utf8Start)
        var k = 0
        while count - k >= 8 {
            guard have.loadUnaligned(fromByteOffset: k, as: UInt64.self)
                    == want.loadUnaligned(fromByteOffset: k, as: UInt64.self) else { return false }
            k += 8
        }
        while k < count {
            guard have.load(fromByteOffset: k, as: UInt8.self) == want.load(fromByteOffset: k, as: UInt8.self)
            else { return false }
            k += 1
        }
        index += count
        return true
    }

    /// A session ID at the cursor in the form `encode` writes: a quoted run of 1-64 bytes of A-Z a-z 0-9 . _ -
    /// (`MessageCodec.isValidSessionID`), checked on the bytes before the `String` is made (the check on the
    /// `String` iterated its UTF-8 view, about 800 instructions per chunk). Anything else, an escape included,
    /// returns nil: the general parser decides, as for every non-canonical message.
    mutating func sessionID() -> String? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        let start = index + 1
        // The connection's last session again (every line of a stream): its bytes and then the closing quote are
        // exactly what the scan below would accept (`knownSession` is a session this reader returned, so its bytes
        // are session bytes, 1-64 of them), and the message carries that same string.
        if let known = knownSession, let base = bytes.baseAddress {
            let same: Bool? = known.utf8.withContiguousStorageIfAvailable { k in
                guard let kb = k.baseAddress, k.count > 0, k.count < bytes.count - start,  // the bytes, the quote
                      base[start + k.count] == UInt8(ascii: "\"") else { return false }
                return Self.equalBytes(base + start, kb, k.count)
            }
            if same == true {
                index = start + known.utf8.count + 1
                return known
            }
        }
        var end = start
        while end < bytes.count, end - start <= 64, Self.isSessionByte(bytes[end]) { end += 1 }
        guard end < bytes.count, bytes[end] == UInt8(ascii: "\""), end > start, end - start <= 64 else { return nil }
        index = end + 1
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)  // ASCII
    }

    /// `count` bytes at `a` and at `b` are equal (eight at a time; both ranges are inside their buffers).
    static func equalBytes(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ count: Int) -> Bool {
        let ra = UnsafeRawPointer(a), rb = UnsafeRawPointer(b)
        var k = 0
        while count - k >= 8 {
            guard ra.loadUnaligned(fromByteOffset: k, as: UInt64.self) == rb.loadUnaligned(fromByteOffset: k, as: UInt64.self)
            else { return false }
            k += 8
        }
        while k < count {
            guard a[k] == b[k] else { return false }
            k += 1
        }
        return true
    }

    /// Whether `b` is one of A-Z a-z 0-9 . _ -, read from two 64-bit maps (bit `b` of the first for bytes below
    /// 0x40: digits, "." and "-"; bit `b - 0x40` of the second: letters and "_"): one shift and mask per byte
    /// instead of six range tests. Tested against the range tests for all 256 bytes.
    @inline(__always)
    static func isSessionByte(_ b: UInt8) -> Bool {
        // Bytes of 0x80 and above are never session bytes; below, one of the two words says.
        b < 0x40 ? ((0x03FF_6000_0000_0000 as UInt64) >> UInt64(b)) & 1 != 0
            : b < 0x80 && ((0x07FF_FFFE_87FF_FFFE as UInt64) >> UInt64(b - 0x40)) & 1 != 0
    }

    /// A chunk's text: a JSON string at the cursor. Without escapes (the common case): the range of its bytes up to
    /// the closing quote, no control characters, valid UTF-8 (`UTF8Check`), and no `String` made (the chunk keeps
    /// the frame's bytes: `Chunk.init(seq:textIn:_:final:)`). With an escape: the `String` the general parser's
    /// `parseString` makes (same rules as `decodeGeneral`). The empty text is the empty `String`.
    mutating func text() -> (range: Range<Int>, string: String?)? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        let start = index + 1
        var end = start
        var high: UInt8 = 0  // any byte ≥ 0x80 sets the top bit: non-ASCII seen
        if let base = bytes.baseAddress {
            // Eight bytes at a time while none of them is a quote, a backslash or a control character (each test
            // is exact about whether such a byte exists in the word); the word that has one is read byte by byte
            // below. The load stays inside the frame: `end + 8 <= bytes.count`.
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            var seen: UInt64 = 0
            while bytes.count - end >= 8 {
                let w = UnsafeRawPointer(base + end).loadUnaligned(as: UInt64.self)
                let quote = w ^ (ones &* 0x22)
                let backslash = w ^ (ones &* 0x5C)
                let stop = (((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((w &- ones &* 0x20) & ~w))
                    & highs
                if stop != 0 {
                    // The lowest flagged byte is the first stop byte (a borrow only runs upwards from a byte that
                    // is itself one); the bytes before it are text. The byte loop below starts at that byte.
                    let before = stop.trailingZeroBitCount >> 3
                    seen |= w & ((1 << (UInt64(before) << 3)) &- 1)
                    end += before
                    break
                }
                seen |= w
                end += 8
            }
            if seen & highs != 0 { high = 0x80 }
        }
        while end < bytes.count {
            let b = bytes[end]
            if b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { break }
            high |= b
            end += 1
        }
        if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
            // Pure ASCII is valid UTF-8; otherwise exactly what `JSONParser.parseString`'s own fast path accepts.
            if high & 0x80 != 0, !UTF8Check.isValid(UnsafeBufferPointer(rebasing: bytes[start..<end])) { return nil }
            index = end + 1
            return end == start ? (0..<0, "") : (start..<end, nil)
        }
        guard end < bytes.count, bytes[end] == UInt8(ascii: "\\") else { return nil }  // control char or no end
        var parser = JSONParser(bytes: array, maxDepth: 8)
        parser.index = index
        guard let s = try? parser.parseString() else { return nil }
        index = parser.index
        return (0..<0, s)
    }

    /// `"seq":N,"text":"…","final":true|false`, with the codec's rules: seq 1…2^53 written without leading zeros
    /// (at most 16 digits), text at most `maxChunkTextBytes` of UTF-8.
    mutating func chunkMembers() -> Chunk? {
        guard let (seq, text, final) = members() else { return nil }
        return makeChunk(seq, text, final)
    }

    /// `chunkMembers` appended to `chunks` (the chunk is made in the call that appends it); false (nothing
    /// appended, nothing consumed) where `chunkMembers` returns nil.
    mutating func appendChunk(to chunks: inout [Chunk]) -> Bool {
        guard let (seq, text, final) = members() else { return false }
        chunks.append(makeChunk(seq, text, final))
        return true
    }

    /// The chunk of `members`: its text in the frame, or the `String` an escape made.
    @inline(__always)
    func makeChunk(_ seq: UInt64, _ text: (range: Range<Int>, string: String?), _ final: Bool) -> Chunk {
        if let string = text.string { return Chunk(seq: seq, text: string, final: final) }
        return Chunk(seq: seq, textIn: array, text.range, final: final)
    }

    /// The members of `chunkMembers`, as plain values (a tuple of a number, a text and a flag moves without
    /// the value-witness copies a `Chunk?` took).
    mutating func members() -> (UInt64, (range: Range<Int>, string: String?), Bool)? {
        let mark = index
        guard literal(#""seq":"#) else { return nil }
        let start = index
        var seq: UInt64 = 0
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
            guard index - start < 16 else { index = mark; return nil }  // 2^53 has 16 digits: no overflow below
            seq = seq * 10 + UInt64(bytes[index] - UInt8(ascii: "0"))
            index += 1
        }
        guard index > start, bytes[start] != UInt8(ascii: "0"), seq <= MessageCodec.maxSeq,
              literal(#","text":"#), let text = text(),
              (text.string?.utf8.count ?? text.range.count) <= SpeakBridgeProtocol.maxChunkTextBytes
        else { index = mark; return nil }
        let final: Bool
        if literal(#","final":true"#) {
            final = true
        } else if literal(#","final":false"#) {
            final = false
        } else {
            index = mark
            return nil
        }
        return (seq, text, final)
    }
}
