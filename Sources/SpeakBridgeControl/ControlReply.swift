import SpeakBridgeProtocol
import SpeakBridgeStore

/// Every answer the daemon gives on the control socket.
public enum ControlReply: Sendable, Equatable {
    case status(StatusReply)
    case pair(PairReply)
    case devices(DevicesReply)
    case revoked(RevokeReply)
    case typeHere(TypeHereReply)
    case failure(ControlFailure)

    public var json: JSONValue {
        switch self {
        case .status(let r): return r.json
        case .pair(let r): return r.json
        case .devices(let r): return r.json
        case .revoked(let r): return r.json
        case .typeHere(let r): return r.json
        case .failure(let f): return f.json
        }
    }
}

/// A reply type the CLI can ask for with `ControlClient.ask`.
public protocol ControlReplyDecodable {
    init(json: JSONValue) throws(ControlFailure)
}

extension StatusReply: ControlReplyDecodable {}
extension PairReply: ControlReplyDecodable {}
extension DevicesReply: ControlReplyDecodable {}
extension RevokeReply: ControlReplyDecodable {}
extension TypeHereReply: ControlReplyDecodable {}

/// Why a control request got no answer of the expected kind.
public enum ControlError: Error, Sendable, CustomStringConvertible {
    /// The daemon could not be reached (or must not be: a socket of another user); `noDaemon` when none runs.
    case transport(StoreError)
    /// The daemon answered with a refusal.
    case refused(ControlFailure)

    public var message: String {
        switch self {
        case .transport(let e): return e.message
        case .refused(let f): return f.error
        }
    }

    public var hint: String? {
        switch self {
        case .transport(let e): return e.hint
        case .refused(let f): return f.hint
        }
    }

    public var noDaemon: Bool {
        if case .transport(let e) = self { return e.noDaemon }
        return false
    }

    public var description: String { message }
}
