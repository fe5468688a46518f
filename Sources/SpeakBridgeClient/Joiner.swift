import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeWebSocket

/// `speakbridge join CODE`: pairs this installation with the desktop that showed the code.
///
/// Flow: parse and check the code → dial every address in it at once → Noise IKpsk1 with the code's secret
/// (prologue "speakbridge.v1 pair") → {pair} / {pair-accept} / {pair-confirm} / {paired} → save the desktop
/// (key, per-pair psk, the address that worked) in peers.json.
public enum Joiner {
    /// Seconds this device's clock may be ahead of the desktop's before a fresh code looks expired here.
    public static let allowedClockSkew: UInt32 = 30

    public static func join(home: Home, code text: String, name: String, timeout: Double = 15,
                            extraCandidates: [Candidate] = []) throws(ClientError) -> Peer {
        let code: PairingCode
        do {
            code = try PairingCode.parse(text)
            // The desktop enforces the expiry by its own clock; allow this device's clock to be a little ahead.
            try code.checkNotExpired(now: UInt32(Date().timeIntervalSince1970), allowedClockSkew: Self.allowedClockSkew)
        } catch {
            if case .expired(let secondsAgo) = error {
                throw CodeMessages.expired(expiry: code0Expiry(text), secondsAgo: secondsAgo)
            }
            throw ClientError("invalid pairing code: \(error.description)", hint: error.hint)
        }
        let (identity, peers) = try SessionLink.localState(home)
        guard let desktopKey = try? X25519PublicKey(rawRepresentation: code.publicKey) else {
            throw ClientError("invalid pairing code: bad desktop key")
        }
        guard desktopKey != identity.publicKey else {
            throw ClientError("this code was issued by this installation itself",
                              hint: "run `join` on the capture device, or give it a different --home")
        }
        let candidates = code.addresses.map { Candidate(host: $0.description, port: Int(code.port), source: "code") }
            + extraCandidates
        guard let secret = code.secretKey else { throw ClientError("invalid pairing code: bad secret") }
        let session = PairingSession(identity: identity, desktopKey: desktopKey, secret: secret, name: name)
        session.codeExpiry = code.expiry
        let (result, address) = try session.run(candidates: candidates, timeout: timeout)
        let peer = Peer(name: result.desktopName.isEmpty ? "desktop" : result.desktopName, publicKey: desktopKey,
                        psk: result.sessionKey, role: .desktop, lastSeen: Date(),
                        addresses: [address.host] + code.addresses.map(\.description).filter { $0 != address.host },
                        port: Int(code.port))
        do {
            try peers.upsert(peer)
        } catch {
            throw ClientError("paired, but the pairing could not be saved: \(error.description)", hint: error.hint)
        }
        return peer
    }

    /// The expiry written in a code that parsed (only called for `.expired`, which parsing precedes).
    private static func code0Expiry(_ text: String) -> UInt32 {
        (try? PairingCode.parse(text))?.expiry ?? 0
    }
}

/// The two ways a well-formed code is no good, told apart as far as this device can know.
enum CodeMessages {
    /// This device's clock says the code expired (beyond the allowed skew): the desktop would refuse it too.
    static func expired(expiry: UInt32, secondsAgo: Int) -> ClientError {
        ClientError("this pairing code expired at \(clock(expiry)) (\(secondsAgo) s ago)",
                    hint: "run `speakbridge pair` on the desktop for a new code; if it was just shown, check both devices' clocks")
    }

    /// The desktop answered but the handshake under the code's secret never completed. The desktop does not say
    /// why (it never answers a wrong or stale secret), so the message lists what it can be.
    static func refused(expiry: UInt32?, now: Date = Date()) -> ClientError {
        var reasons = "it was already used, replaced by a newer `speakbridge pair`, or revoked after failed attempts"
        if let expiry, UInt64(now.timeIntervalSince1970) >= UInt64(expiry) {
            reasons += ", or it expired at \(clock(expiry)) (by this device's clock)"
        }
        return ClientError("the desktop did not accept this code: \(reasons)",
                           hint: "run `speakbridge pair` on the desktop for a new code")
    }

    /// "14:31:05", local time.
    static func clock(_ unixSeconds: UInt32) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(unixSeconds)))
    }
}

/// One pairing attempt, driven on its own queue; `run` blocks the caller until it ends.
/// Every address that opens gets its own handshake; the first that completes pairing wins. The code's
/// addresses may be stale, so the desktop is also looked for by its key over mDNS.
final class PairingSession: @unchecked Sendable {
    let identity: Identity
    let desktopKey: X25519PublicKey
    let secret: SymmetricKey
    let name: String
    let queue = DispatchQueue(label: "sb-join")
    let done = DispatchSemaphore(value: 0)
    var dialer: Dialer!
    var finder: DesktopFinder?
    var machines: [WebSocketConnectionID: InitiatorMachine] = [:]
    var outcome: Result<(PairingResult, Candidate), ClientError>?
    var failures: [String] = []
    var triedAnything = false
    /// The code's expiry, for the message when the desktop does not accept it.
    var codeExpiry: UInt32?

    init(identity: Identity, desktopKey: X25519PublicKey, secret: SymmetricKey, name: String) {
        self.identity = identity
        self.desktopKey = desktopKey
        self.secret = secret
        self.name = name
    }

    func run(candidates: [Candidate], timeout: Double) throws(ClientError) -> (PairingResult, Candidate) {
        do {
            dialer = try Dialer(queue: queue) { [weak self] event in self?.handle(event) }
        } catch {
            throw ClientError("cannot start the WebSocket client: \(error)")
        }
        queue.async {
            self.finder = DesktopFinder(desktop: KeySchedule.deviceID(of: self.desktopKey), queue: self.queue) { [weak self] found in
                guard let self, self.outcome == nil else { return }
                self.dialer.dial(found, path: ConnectionIntent.pair.path)
            }
            self.dialer.dial(candidates, path: ConnectionIntent.pair.path)
        }
        if done.wait(timeout: .now() + timeout) == .timedOut {
            queue.sync {
                let detail = failures.isEmpty ? "" : " (\(failures.joined(separator: "; ")))"
                finish(.failure(ClientError("the desktop did not complete pairing within \(Int(timeout)) s\(detail)",
                                            hint: "check that `speakbridge serve` runs and that its port is reachable from here")))
            }
        }
        dialer.shutdown()
        switch queue.sync(execute: { outcome! }) {
        case .success(let value): return value
        case .failure(let error): throw error
        }
    }

    func finish(_ result: Result<(PairingResult, Candidate), ClientError>) {
        guard outcome == nil else { return }
        outcome = result
        finder?.stop()
        dialer.hangUp()
        done.signal()
    }

    func handle(_ event: Dialer.Event) {
        switch event {
        case .opened(let id, _):
            triedAnything = true
            do {
                var m = try InitiatorMachine(intent: .pair, localStatic: identity.privateKey, desktopKey: desktopKey,
                                             psk: secret, firstMessage: .pair(name: name))
                dialer.send(try m.start(), on: id)
                machines[id] = m
            } catch {
                finish(.failure(ClientError("pairing failed: \(error)")))
            }
        case .message(let id, let frame):
            guard var m = machines[id] else { return }
            let actions = m.receive(frame)
            machines[id] = m
            for action in actions {
                switch action {
                case .send(let bytes):
                    dialer.choose(id)  // message 2 verified: this is the desktop of the code
                    dialer.send(bytes, on: id)
                case .paired(let result):
                    finish(.success((result, dialer.candidate(id) ?? Candidate(host: "?", port: 0, source: "?"))))
                case .close(let reason):
                    failures.append(reason)
                    dialer.close(id)
                case .established, .received:
                    break
                }
            }
        case .closed(let id, let reason):
            if machines.removeValue(forKey: id) != nil, dialer.chosen == nil || dialer.chosen == id {
                failures.append("connection closed (\(reason))")
            }
            if dialer.chosen == id {
                finish(.failure(ClientError("pairing failed: the desktop closed the connection",
                                            hint: "run `speakbridge pair` on the desktop for a new code")))
            }
        case .exhausted(let reason):
            // Everything tried so far failed; mDNS may still find the desktop until the timeout.
            if triedAnything {
                finish(.failure(CodeMessages.refused(expiry: codeExpiry)))
            } else if finder?.isBrowsing != true {
                finish(.failure(ClientError("pairing failed: cannot reach the desktop (\(reason))",
                                            hint: "check the network, or give the address with --address HOST:PORT")))
            }
        }
    }
}
