/// One final (or interim) piece of transcript.
public struct Chunk: Sendable, Equatable {
    public var seq: UInt64
    public var text: String
    public var final: Bool
    public var lang: String?
    public var speaker: String?
    /// Start and end of the spoken phrase in seconds since the session began.
    public var start: Double?
    public var end: Double?

    public init(seq: UInt64, text: String, final: Bool = true, lang: String? = nil, speaker: String? = nil,
                start: Double? = nil, end: Double? = nil) {
        self.seq = seq
        self.text = text
        self.final = final
        self.lang = lang
        self.speaker = speaker
        self.start = start
        self.end = end
    }
}

/// Error codes carried in `{"type":"error"}`; PROTOCOL.md has the table.
public enum ProtocolErrorCode: String, Sendable {
    case malformed
    case unknownType = "unknown-type"
    case badSession = "bad-session"
    case gap
    case tooLarge = "too-large"
    case unexpected
    case internalError = "internal"
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
    case error(code: String, message: String, expected: UInt64?)
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
