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

    public static func == (a: Candidate, b: Candidate) -> Bool { a.host == b.host && a.port == b.port }
    public func hash(into h: inout Hasher) {
        h.combine(host)
        h.combine(port)
    }
}

/// Tries every candidate address at once. Each connection that opens is handed to the owner, who runs a
/// handshake on it; the first one whose handshake proves the paired key is `choose`n and the rest are closed.
/// So a dead address never delays a live one, and an address that answers with another key (a different
/// desktop got that IP, or a spoofed mDNS record) simply loses. Events are delivered on `queue`.
final class Dialer: @unchecked Sendable {
    enum Event {
        case opened(WebSocketConnectionID, Candidate)
        case message(WebSocketConnectionID, [UInt8])
        case closed(WebSocketConnectionID, String)
        /// No connection is open or being attempted, and none was chosen: the reasons of the failures.
        case exhausted(String)
    }

    struct Handler: Sendable { let call: @Sendable (Event) -> Void }

    let queue: DispatchQueue
    let handler: Handler
    var client: WebSocketClient!
    // Owned by `queue`.
    var pending: [WebSocketConnectionID: Candidate] = [:]
    var open: [WebSocketConnectionID: Candidate] = [:]
    var chosen: WebSocketConnectionID?
    /// Attempts made by `probe` while a connection is chosen: allowed to open beside it.
    var probing: Set<WebSocketConnectionID> = []
    var failures: [String] = []
    var path = ""

    init(queue: DispatchQueue, onEvent: @escaping @Sendable (Event) -> Void) throws {
        self.queue = queue
        self.handler = Handler(call: onEvent)
        client = try WebSocketClient { [weak self] event in
            guard let self else { return }
            self.queue.sync { self.handle(event) }  // inline when idle: no extra wake-up per frame
        }
    }

    /// Dials candidates not already being tried. Must be called on `queue`.
    func dial(_ candidates: [Candidate], path: String, timeout: Int = 5) {
        self.path = path
        guard chosen == nil else { return }
        let busy = Set(pending.values).union(open.values)
        let fresh = candidates.filter { !busy.contains($0) }
        if fresh.isEmpty && pending.isEmpty && open.isEmpty {
            handler.call(.exhausted(candidates.isEmpty ? "no address known" : failures.joined(separator: "; ")))
            return
        }
        for candidate in fresh {
            let id = client.connect(host: candidate.host, port: candidate.port, path: path,
                                    subprotocol: SpeakBridgeProtocol.subprotocol, timeout: timeout)
            pending[id] = candidate
        }
    }

    /// Dials candidates beside the chosen connection ("make before break"), for when discovery says the
    /// desktop now lives elsewhere and the chosen connection may be dead without knowing it yet (an address
    /// that vanished sends no RST). Each that opens is reported as `.opened`; the owner runs a handshake and
    /// `choose`s it only if it proves the paired key, so a forged record can never take the live connection
    /// down. A probe that fails just closes; it never reports `.exhausted`. Must be called on `queue`.
    func probe(_ candidates: [Candidate], path: String, timeout: Int = 5) {
        guard chosen != nil else {
            dial(candidates, path: path, timeout: timeout)
            return
        }
        let busy = Set(pending.values).union(open.values)
        for candidate in candidates where !busy.contains(candidate) {
            let id = client.connect(host: candidate.host, port: candidate.port, path: path,
                                    subprotocol: SpeakBridgeProtocol.subprotocol, timeout: timeout)
            pending[id] = candidate
            probing.insert(id)
        }
    }

    var isIdle: Bool { chosen == nil && pending.isEmpty && open.isEmpty }

    func candidate(_ id: WebSocketConnectionID) -> Candidate? { open[id] }

    /// Keeps `id`, closes every other connection and attempt. Must be called on `queue`.
    func choose(_ id: WebSocketConnectionID) {
        chosen = id
        probing.removeAll()
        for other in Array(pending.keys) + Array(open.keys) where other != id { client.close(other) }
    }

    func send(_ frame: [UInt8], on id: WebSocketConnectionID) { client.send(frame, on: id) }

    func close(_ id: WebSocketConnectionID) { client.close(id) }

    /// Closes everything. Must be called on `queue`.
    func hangUp() {
        for id in Array(pending.keys) + Array(open.keys) { client.close(id) }
    }

    func shutdown() { client.shutdown() }

    func handle(_ event: WebSocketEvent) {
        switch event {
        case .opened(let id, _, _):
            guard let candidate = pending.removeValue(forKey: id) else { return }
            guard chosen == nil || probing.contains(id) else {
                client.close(id)
                return
            }
            open[id] = candidate
            handler.call(.opened(id, candidate))
        case .message(let id, let bytes):
            if open[id] != nil { handler.call(.message(id, bytes)) }
        case .closed(let id, let reason):
            probing.remove(id)
            if let candidate = pending.removeValue(forKey: id) ?? open.removeValue(forKey: id) {
                failures.append("\(candidate): \(reason)")
                if failures.count > 8 { failures.removeFirst() }
            }
            let wasChosen = chosen == id
            if wasChosen { chosen = nil }
            handler.call(.closed(id, reason))
            if !wasChosen && chosen == nil && pending.isEmpty && open.isEmpty {
                handler.call(.exhausted(failures.joined(separator: "; ")))
            }
        }
    }
}
