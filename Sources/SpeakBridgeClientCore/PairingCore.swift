import SpeakBridgeCrypto
import SpeakBridgeProtocol

/// The `join` role as a value: one pairing attempt over every address at once (`LinkCore` with the code's
/// secret). The first connection whose message 2 proves the code's desktop is kept; it ends with `paired`
/// or a `Failure`, which `Joiner` words for the user. No socket, no clock: the shell times it out.
public struct PairingCore {
    public enum Failure: Equatable, Sendable {
        /// Some address answered, none completed the handshake under the code's secret.
        case refused
        /// The desktop closed the connection after proving the code (before `paired`).
        case closed
        /// Nothing answered and mDNS cannot find more (the dial failures).
        case unreachable(String)
        /// The time ran out (what failed until then, "" when nothing did).
        case timedOut(String)
    }

    public enum Action {
        case dial(AttemptID, Candidate, path: String, subprotocols: [String])
        case send(AttemptID, [UInt8])
        case close(AttemptID)
        case paired(PairingResult, Candidate)
        case failed(Failure)
    }

    public private(set) var link: LinkCore
    /// mDNS is browsing, so an exhausted round is not the end before the timeout.
    public var browsing: Bool
    var failures: [String] = []
    var triedAnything = false
    public private(set) var isFinished = false

    public init(localStatic: X25519PrivateKey, desktopKey: X25519PublicKey, secret: SymmetricKey, name: String,
                candidates: [Candidate], browsing: Bool) {
        link = LinkCore(intent: .pair, firstMessage: .pair(name: name), localStatic: localStatic,
                        desktopKey: desktopKey, psk: secret, known: candidates, extra: [])
        self.browsing = browsing
    }

    public mutating func start() -> [Action] { map(link.connect()) }

    public mutating func found(_ list: [Candidate]) -> [Action] {
        guard !isFinished else { return [] }
        return map(link.found(list))
    }

    /// `subprotocol`: the one the desktop chose (`LinkCore.opened`).
    public mutating func opened(_ id: AttemptID, subprotocol: String?) -> [Action] {
        triedAnything = true
        return map(link.opened(id, subprotocol: subprotocol))
    }

    public mutating func frame(_ id: AttemptID, _ bytes: [UInt8]) -> [Action] { map(link.frame(id, bytes)) }

    public mutating func closed(_ id: AttemptID, reason: String) -> [Action] { map(link.closed(id, reason: reason)) }

    public mutating func timedOut() -> [Action] {
        finish(.failed(.timedOut(failures.joined(separator: "; "))))
    }

    /// Closes every connection (after the outcome).
    public mutating func hangUp() -> [Action] { map(link.hangUp()) }

    mutating func map(_ actions: [LinkCore.Action]) -> [Action] {
        var out: [Action] = []
        for action in actions {
            switch action {
            case .dial(let id, let c, let path, let offer): out.append(.dial(id, c, path: path, subprotocols: offer))
            case .send(let id, let bytes): out.append(.send(id, bytes))
            case .close(let id): out.append(.close(id))
            case .paired(let result, let c): out += finish(.paired(result, c))
            case .machineClosed(let reason, _): failures.append(reason)
            case .handshakeClosed(_, let reason): failures.append("connection closed (\(reason))")
            case .lost(let reason):
                failures.append("connection closed (\(reason))")
                out += finish(.failed(.closed))
            case .exhausted(let reason, _):
                // Everything tried so far failed; mDNS may still find the desktop until the timeout.
                if triedAnything {
                    out += finish(.failed(.refused))
                } else if !browsing {
                    out += finish(.failed(.unreachable(reason)))
                }
            case .established, .received, .remember:
                break
            }
        }
        return out
    }

    mutating func finish(_ action: Action) -> [Action] {
        guard !isFinished else { return [] }
        isFinished = true
        return [action]
    }
}
