import Foundation
import SpeakBridgeProtocol
import SpeakBridgeWebSocket

/// An address to try, with where it came from (for messages and for remembering what worked).
public struct Candidate: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var source: String

    public init(host: String, port: Int, source: String) {
        self.host = host
        self.port = port
        self.source = source
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Tries every candidate address at once and keeps the first connection that opens; the rest are closed.
/// A dead address therefore never delays a live one. Events are delivered on `queue`.
final class Dialer: @unchecked Sendable {
    enum Event {
        case connected(WebSocketConnectionID, Candidate)
        case message([UInt8])
        /// The connection in use closed, or every candidate failed (`nil` reason: no candidate at all).
        case disconnected(String)
    }

    struct Handler: Sendable { let call: @Sendable (Event) -> Void }

    let queue: DispatchQueue
    let handler: Handler
    var client: WebSocketClient!
    // Owned by `queue`.
    var attempts: [WebSocketConnectionID: Candidate] = [:]
    var active: WebSocketConnectionID?
    var failures: [String] = []

    init(queue: DispatchQueue, onEvent: @escaping @Sendable (Event) -> Void) throws {
        self.queue = queue
        self.handler = Handler(call: onEvent)
        client = try WebSocketClient { [weak self] event in
            guard let self else { return }
            self.queue.sync { self.handle(event) }  // inline when idle: no extra wake-up per frame
        }
    }

    /// Must be called on `queue`.
    func dial(_ candidates: [Candidate], path: String, timeout: Int = 5) {
        failures = []
        guard !candidates.isEmpty else {
            handler.call(.disconnected("no address to try"))
            return
        }
        for candidate in candidates {
            let id = client.connect(host: candidate.host, port: candidate.port, path: path,
                                    subprotocol: SpeakBridgeProtocol.subprotocol, timeout: timeout)
            attempts[id] = candidate
        }
    }

    var isConnected: Bool { active != nil }

    /// Must be called on `queue`.
    func send(_ frame: [UInt8]) {
        guard let active else { return }
        client.send(frame, on: active)
    }

    /// Must be called on `queue`.
    func hangUp() {
        if let active { client.close(active) }
        for id in attempts.keys { client.close(id) }
    }

    func shutdown() { client.shutdown() }

    func handle(_ event: WebSocketEvent) {
        switch event {
        case .opened(let id, _, _):
            guard let candidate = attempts.removeValue(forKey: id) else { return }
            if active == nil {
                active = id
                for other in attempts.keys { client.close(other) }
                handler.call(.connected(id, candidate))
            } else {
                client.close(id)
            }
        case .message(let id, let bytes):
            if id == active { handler.call(.message(bytes)) }
        case .closed(let id, let reason):
            if id == active {
                active = nil
                handler.call(.disconnected(reason))
            } else if let candidate = attempts.removeValue(forKey: id) {
                failures.append("\(candidate): \(reason)")
                if attempts.isEmpty && active == nil {
                    handler.call(.disconnected(failures.joined(separator: "; ")))
                }
            }
        }
    }
}
