import SpeakBridgeSupport

/// One final (or interim) piece of transcript.
public struct Chunk: Sendable, Equatable {
    public var seq: UInt64 { didSet { dropEncoded() } }
    /// The text. A chunk the desktop decoded from a canonical frame holds its text as bytes of that frame
    /// (`init(seq:textIn:_:final:)`), and a line `send` journaled from its bytes as bytes of its journal record
    /// (`init(seq:lineIn:text:encoded:)`): reading `text` then makes a new `String` each time, so the hot paths
    /// (framing, escaping, byte counts) read `withTextUTF8` and `textUTF8Count` instead, and only what needs a
    /// `String` (typing, the clipboard, JSON lines, status) makes one.
    public var text: String {
        get { textCount == 0 ? storedText : String(decoding: textBytesUnchecked(), as: UTF8.self) }
        set {
            storedText = newValue
            textCount = 0
            dropEncoded()
        }
    }
    public var final: Bool { didSet { dropEncoded() } }
    public var lang: String? {
        get { extras?.lang }
        set { extras = Extras.make(lang: newValue, speaker: speaker, start: start, end: end) }
    }
    public var speaker: String? {
        get { extras?.speaker }
        set { extras = Extras.make(lang: lang, speaker: newValue, start: start, end: end) }
    }
    /// Start and end of the spoken phrase in seconds since the session began.
    public var start: Double? {
        get { extras?.start }
        set { extras = Extras.make(lang: lang, speaker: speaker, start: newValue, end: end) }
    }
    public var end: Double? {
        get { extras?.end }
        set { extras = Extras.make(lang: lang, speaker: speaker, start: start, end: newValue) }
    }
    /// The text when it is not in `buffer` (`textCount == 0`); empty otherwise.
    @usableFromInline var storedText: String
    /// The rare members, behind one reference that is nil for the usual chunk (no language, speaker or times): a
    /// chunk is copied several times on its way through each side, and two optional strings and two optional
    /// doubles made every copy larger and slower.
    private var extras: Extras? { didSet { dropEncoded() } }
    /// Whether any rare member (lang, speaker, start, end) is set: one test instead of four getters.
    package var hasExtras: Bool { extras != nil }

    /// Immutable: a change makes a new one (`make`), so copies of a chunk never share a change.
    private final class Extras: Sendable {
        let lang: String?
        let speaker: String?
        let start: Double?
        let end: Double?

        init(lang: String?, speaker: String?, start: Double?, end: Double?) {
            self.lang = lang
            self.speaker = speaker
            self.start = start
            self.end = end
        }

        static func make(lang: String?, speaker: String?, start: Double?, end: Double?) -> Extras? {
            lang == nil && speaker == nil && start == nil && end == nil
                ? nil : Extras(lang: lang, speaker: speaker, start: start, end: end)
        }
    }
    /// This chunk's JSON object exactly as `MessageCodec.writeChunk` writes it, when the journal has just written it
    /// (`Outbox.append`: a range of the journal record's buffer, no copy): the message encoder copies these bytes
    /// instead of escaping the text a second time. Any change to a field drops it. Not part of equality. The window
    /// drops it once the chunk's message is made (`OutboxWindow`), so unacknowledged chunks do not hold it (a chunk
    /// whose text is in the same record keeps the record for its text).
    package var encoded: ArraySlice<UInt8>? { hasEncoded ? buffer.map { $0[encodedRange] } : nil }
    /// `encoded.count`, or 0 without it (no slice made).
    package var encodedCount: Int { hasEncoded ? encodedRange.count : 0 }
    private var hasEncoded: Bool { buffer != nil && !encodedRange.isEmpty }
    /// The buffer behind `encoded` and the text (the journal record, on the sender) or behind the text (the
    /// decrypted frame, on the desktop): one optional reference in the struct. An `ArraySlice?` here cost the desktop about 470
    /// instructions a burst line in generic value-witness calls.
    @usableFromInline var buffer: [UInt8]? = nil
    /// `encoded`'s bytes in `buffer`; empty: none.
    private var encodedRange: Range<Int> = 0..<0
    /// The text's UTF-8 in `buffer` (`textCount > 0`; a frame is at most 65,535 bytes, so 32 bits each).
    @usableFromInline var textStart: UInt32 = 0
    @usableFromInline var textCount: UInt32 = 0

    package mutating func dropEncoded() {
        encodedRange = 0..<0
        if textCount == 0 { buffer = nil }
    }

    /// The text's bytes in `buffer` (only when `textCount > 0`). The range was checked against the buffer when the
    /// chunk was made, and the buffer never changes (a mutation makes the array unique first, with the same bytes).
    private func textBytesUnchecked() -> ArraySlice<UInt8> {
        buffer![Int(textStart)..<(Int(textStart) + Int(textCount))]
    }

    /// `text.utf8.count`, without making the `String` of a chunk whose text is in a frame. Inlinable, as is
    /// `withTextUTF8`: called from another module, a chunk read in place from an array was copied (three
    /// references retained and released) to be passed to them.
    @inlinable
    public var textUTF8Count: Int { textCount == 0 ? storedText.utf8.count : Int(textCount) }

    /// Calls `body` with the text's UTF-8 bytes in place: the frame's bytes, or the string's storage (a native
    /// string's, as every text this process makes is; otherwise a contiguous copy).
    @inlinable
    public func withTextUTF8<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        if textCount != 0, let buffer {
            let start = Int(textStart), count = Int(textCount)
            return try buffer.withUnsafeBufferPointer { try body(UnsafeBufferPointer(rebasing: $0[start..<(start + count)])) }
        }
        var text = storedText
        return try text.withUTF8(body)
    }

    /// The same chunk with its text in its own `String`, not in the frame it was decoded from: for a chunk kept
    /// while others of its frame are dropped (duplicates), so that it does not hold the whole frame.
    package func detached() -> Chunk {
        guard textCount != 0 else { return self }
        var copy = self
        copy.text = text  // drops the frame (and the encoded form, which a decoded chunk does not have)
        return copy
    }

    /// Whether the text lives in `buffer` (a frame's or a journal record's bytes), not in a `String` (for tests).
    package var textIsInBuffer: Bool { textCount != 0 }

    /// `MessageCodec.encodedSizeBound(self)`, for a held chunk in place (`storage[i].sizeBound()`): its fields read
    /// where they are. Reading a held chunk through `get`, or passing it on from here, copied it (three references
    /// retained and released).
    package mutating func sizeBound() -> Int {
        if hasEncoded && extras == nil {
            return MessageCodec.sizeBound(encodedCount: encodedRange.count, final: final, seq: seq)
        }
        return MessageCodec.encodedSizeBound(self)
    }

    /// Appends this chunk's JSON object to `out` (`MessageCodec.writeChunk`: its `encoded` bytes when it has them)
    /// and drops the encoded bytes; returns how many it dropped (0 without them). For the window's encoded batches,
    /// in place (`storage[i].moveObject(into:)`), so no copy of the chunk is made to read them.
    package mutating func moveObject(into out: inout [UInt8]) -> Int {
        guard hasEncoded, let buffer else {
            MessageCodec.writeChunk(self, into: &out)
            return 0
        }
        let range = encodedRange
        buffer.withUnsafeBufferPointer { out.append(contentsOf: UnsafeBufferPointer(rebasing: $0[range])) }
        dropEncoded()
        return range.count
    }

    /// Equal fields (the cached encoding is a copy of what they say, or absent; where the text is stored is not
    /// part of it).
    public static func == (a: Chunk, b: Chunk) -> Bool {
        guard a.seq == b.seq, a.final == b.final else { return false }
        let sameText = a.textCount == 0 && b.textCount == 0 ? a.storedText == b.storedText : a.text == b.text
        return sameText && a.lang == b.lang && a.speaker == b.speaker && a.start == b.start && a.end == b.end
    }
}

/// The initializers delegate to the struct's implicit memberwise initializer (so they live in an extension, where it
/// stays available). Written in the struct with one assignment per stored property, each compiled to a copy of the
/// whole new chunk and the destruction of another (three references retained and released, about 200 instructions
/// a chunk: Swift 6.3 keeps both loads of the `self` it builds on the stack); the memberwise one builds it in place.
extension Chunk {
    public init(seq: UInt64, text: String, final: Bool = true, lang: String? = nil, speaker: String? = nil,
                start: Double? = nil, end: Double? = nil) {
        self.init(seq: seq, final: final, storedText: text,
                  extras: Extras.make(lang: lang, speaker: speaker, start: start, end: end))
    }

    /// `init(seq:text:)`: a final chunk without rare members (a line of `send`'s input, `Outbox.append`).
    package init(seq: UInt64, line text: String) {
        self.init(seq: seq, final: true, storedText: text, extras: nil)
    }

    /// `init(seq:line:)` with its encoded object (`encoded`): `buffer[range]` must be exactly what
    /// `MessageCodec.writeChunk` writes for it (the journal record's middle).
    package init(seq: UInt64, line text: String, encodedIn buffer: [UInt8], _ range: Range<Int>) {
        self.init(seq: seq, final: true, storedText: text, extras: nil, buffer: buffer, encodedRange: range)
    }

    /// `init(seq:line:encodedIn:_:)` for a line journaled from its bytes (`Outbox.append(lines:)`): the text is
    /// `record[text]` (a plain text, written in the record as itself) and the object `record[encoded]`.
    package init(seq: UInt64, lineIn record: [UInt8], text: Range<Int>, encoded: Range<Int>) {
        precondition(encoded.lowerBound <= text.lowerBound && text.upperBound <= encoded.upperBound,
                     "a journaled line's text lies inside its object")
        self.init(seq: seq, textIn: record, text, final: true, encoded: encoded)
    }

    /// A chunk whose text is `buffer[range]`, kept in place (the canonical decoder: no `String` per chunk; the
    /// frame), with its encoded object `buffer[encoded]` if any. The bytes must be valid UTF-8 (checked by the
    /// caller) and `range` non-empty and inside `buffer`, which is at most 4 GiB (checked here: a bad range would be
    /// a bug, not a peer's input).
    package init(seq: UInt64, textIn buffer: [UInt8], _ range: Range<Int>, final: Bool, encoded: Range<Int> = 0..<0) {
        precondition(!range.isEmpty && range.lowerBound >= 0 && range.upperBound <= buffer.count
                        && encoded.upperBound <= buffer.count && buffer.count <= Int(UInt32.max),
                     "a chunk's text range lies inside its buffer")
        self.init(seq: seq, final: final, storedText: "", extras: nil, buffer: buffer, encodedRange: encoded,
                  textStart: UInt32(truncatingIfNeeded: range.lowerBound),
                  textCount: UInt32(truncatingIfNeeded: range.count))
    }
}

/// Error codes carried in `{"type":"error"}`; PROTOCOL.md has the table. A code this implementation does not know
/// (a newer peer's) still decodes, as `.other` with the text as received: a peer's error is never itself malformed
/// for its code alone.
public enum ProtocolErrorCode: Sendable, Hashable, CustomStringConvertible {
    case malformed
    case unknownType
    case badSession
    case gap
    case tooLarge
    case unexpected
    case internalError
    /// The device has too many sessions open or used (`SessionLedger.Refusal`).
    case tooManySessions
    /// Any other code, as received (at most 64 bytes; shown only through `PeerText`).
    case other(String)

    static let known: [ProtocolErrorCode] = [.malformed, .unknownType, .badSession, .gap, .tooLarge, .unexpected,
                                             .internalError, .tooManySessions]

    /// The code as it appears on the wire.
    public init(rawValue: String) {
        self = Self.known.first { $0.rawValue == rawValue } ?? .other(rawValue)
    }

    public var rawValue: String {
        switch self {
        case .malformed: return "malformed"
        case .unknownType: return "unknown-type"
        case .badSession: return "bad-session"
        case .gap: return "gap"
        case .tooLarge: return "too-large"
        case .unexpected: return "unexpected"
        case .internalError: return "internal"
        case .tooManySessions: return "too-many-sessions"
        case .other(let raw): return raw
        }
    }

    public var description: String { rawValue }
}

/// Where a sink holds a session's chunks, as the desktop tells the device (`held`). `reason` is the sink's own
/// account (a tool's stderr), already made safe by `sanitizedReason`.
public struct HeldNotice: Sendable, Equatable {
    public var session: String
    /// The first chunk of `session` that `sink` has not taken.
    public var seq: UInt64
    public var sink: String
    public var reason: String

    public static let maxReasonBytes = 512
    public static let maxSinkBytes = 64

    public init(session: String, seq: UInt64, sink: String, reason: String) {
        self.session = session
        self.seq = seq
        self.sink = sink
        self.reason = reason
    }

    /// `text` as one line a peer may show: every scalar `PeerText` would escape becomes a space (runs of them
    /// one space), trimmed, and cut on a scalar boundary to at most `maxBytes` bytes of UTF-8.
    public static func sanitizedReason(_ text: String, maxBytes: Int = HeldNotice.maxReasonBytes) -> String {
        var out = String.UnicodeScalarView()
        var bytes = 0
        var pendingSpace = false
        for scalar in text.unicodeScalars {
            if PeerText.needsEscape(scalar) || scalar == " " {
                pendingSpace = !out.isEmpty
                continue
            }
            let add = (pendingSpace ? 1 : 0) + String(scalar).utf8.count
            guard bytes + add <= maxBytes else { break }
            if pendingSpace { out.append(" ") }
            out.append(scalar)
            bytes += add
            pendingSpace = false
        }
        return String(out)
    }
}

/// Every message of protocol version 1 (the plaintext inside a Noise payload or transport message).
public enum Message: Sendable, Equatable {
    case pair(name: String)
    case pairAccept(name: String, id: String)
    case pairConfirm
    case paired
    case hello(agent: String)
    case welcome
    /// From the client: `delivered` is nil. From the desktop: the last durably delivered sequence number.
    case resume(session: String, delivered: UInt64?)
    case chunk(session: String, Chunk)
    case chunks(session: String, [Chunk])
    case ack(session: String, seq: UInt64)
    case bye
    case error(code: ProtocolErrorCode, message: String, expected: UInt64?)
    /// From the desktop: a sink holds `session` from `seq` on and says why (the chunks stay unacknowledged).
    case held(HeldNotice)
    /// Config transfer (`config-*` types): the whole JSON object, validated by the config module.
    case config(type: String, body: JSONValue)

    public var type: String {
        switch self {
        case .pair: return "pair"
        case .pairAccept: return "pair-accept"
        case .pairConfirm: return "pair-confirm"
        case .paired: return "paired"
        case .hello: return "hello"
        case .welcome: return "welcome"
        case .resume: return "resume"
        case .chunk: return "chunk"
        case .chunks: return "chunks"
        case .ack: return "ack"
        case .bye: return "bye"
        case .error: return "error"
        case .held: return "held"
        case .config(let type, _): return type
        }
    }
}

public enum MessageError: Error, Equatable, Sendable, CustomStringConvertible {
    case malformed(String)
    case unknownType(String)
    case tooLarge(String)

    public var description: String {
        switch self {
        case .malformed(let why): return "malformed message: \(why)"
        case .unknownType(let t): return "unknown message type \"\(t)\""
        case .tooLarge(let why): return "message too large: \(why)"
        }
    }

    public var code: ProtocolErrorCode {
        switch self {
        case .malformed: return .malformed
        case .unknownType: return .unknownType
        case .tooLarge: return .tooLarge
        }
    }
}
