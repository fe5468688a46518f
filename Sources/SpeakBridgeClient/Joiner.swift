import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import SpeakBridgeClientCore
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport
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
        if let page = CodeMessages.browserPage(text) { throw page }
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
        var reasons = "it was already used, replaced by a newer `speakbridge pair`, revoked after failed attempts, or "
            + "it is a browser code from `speakbridge pair --web` (those pair the browser page only)"
        if let expiry, UInt64(now.timeIntervalSince1970) >= UInt64(expiry) {
            reasons += ", or it expired at \(clock(expiry)) (by this device's clock)"
        }
        return ClientError("the desktop did not accept this code: \(reasons)",
                           hint: "run `speakbridge pair` on the desktop for a new code")
    }

    /// The browser page's address that `pair --web` shows (`https://HOST:PORT/#SB1:…`), given to `join`: its code
    /// pairs a browser only (the desktop refuses it on the native route, and says nothing to the stranger about
    /// why), so say so here, before anything is dialled. Nil for anything else (a plain code, or a mistake that the
    /// code parser explains).
    static func browserPage(_ text: String) -> ClientError? {
        let trimmed = String(text.drop { $0.isWhitespace }).lowercased()
        guard trimmed.hasPrefix("https://") || trimmed.hasPrefix("http://"),
              trimmed.contains("#\(PairingCode.prefix.lowercased())") else { return nil }
        return ClientError("this is the address of the desktop's browser page (from `speakbridge pair --web`): open it "
                           + "in the phone's browser; its code pairs that page only",
                           hint: "to pair this device with `join`, run `speakbridge pair` (without --web) on the desktop")
    }

    /// "14:31:05", local time (the TZ environment variable, else /etc/localtime).
    static func clock(_ unixSeconds: UInt32) -> String {
        var seconds = time_t(unixSeconds)
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return "??:??:??" }
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
    }
}

/// One pairing attempt, driven on its own queue; `run` blocks the caller until it ends. A shell around
/// `PairingCore` (every address that opens gets its own handshake; the first that completes pairing wins); the
/// code's addresses may be stale, so the desktop is also looked for by its key over mDNS.
///
/// `@unchecked Sendable`: `core`, `outcome` and `codeExpiry`/`timeoutSeconds` (set before anything is queued) are
/// used on `queue` only; `run` waits on `done` and then reads the outcome through `queue.sync`.
final class PairingSession: @unchecked Sendable {
    let identity: Identity
    let desktopKey: X25519PublicKey
    let secret: SymmetricKey
    let name: String
    let queue = LockedQueue(label: "sb-join")
    let done = DispatchSemaphore(value: 0)
    var driver: LinkDriver!
    // Owned by `queue`.
    var core: PairingCore?
    var outcome: Result<(PairingResult, Candidate), ClientError>?
    /// The code's expiry, for the message when the desktop does not accept it.
    var codeExpiry: UInt32?
    /// For the message when it times out.
    var timeoutSeconds: Double = 0

    init(identity: Identity, desktopKey: X25519PublicKey, secret: SymmetricKey, name: String) {
        self.identity = identity
        self.desktopKey = desktopKey
        self.secret = secret
        self.name = name
    }

    func run(candidates: [Candidate], timeout: Double) throws(ClientError) -> (PairingResult, Candidate) {
        timeoutSeconds = timeout
        do {
            driver = try LinkDriver(queue: queue)
        } catch {
            throw ClientError("cannot start the WebSocket client: \(error)")
        }
        driver.onEvent = { [weak self] event in self?.handle(event) }
        queue.async {
            // At once: the pairing core needs to know whether mDNS browses (and pairing is rare).
            self.driver.findDesktop(KeySchedule.deviceID(of: self.desktopKey), after: .zero)
            var core = PairingCore(localStatic: self.identity.privateKey, desktopKey: self.desktopKey,
                                   secret: self.secret, name: self.name, candidates: candidates,
                                   browsing: self.driver.isBrowsing)
            let actions = core.start()
            self.core = core
            self.perform(actions)
        }
        if done.wait(timeout: .now() + timeout) == .timedOut {
            queue.sync { step { $0.timedOut() } }
        }
        driver.shutdown()
        switch queue.sync({ outcome! }) {
        case .success(let value): return value
        case .failure(let error): throw error
        }
    }

    func handle(_ event: LinkDriver.Event) {
        switch event {
        case .opened(let id, let subprotocol): step { $0.opened(id, subprotocol: subprotocol) }
        case .frame(let id, let bytes): step { $0.frame(id, bytes) }
        case .closed(let id, let reason): step { $0.closed(id, reason: reason) }
        case .found(let list): step { $0.found(list) }
        }
    }

    /// Runs one core step and carries out its actions. On `queue`.
    func step(_ body: (inout PairingCore) -> [PairingCore.Action]) {
        guard var core else { return }
        let actions = body(&core)
        self.core = core
        perform(actions)
    }

    func perform(_ actions: [PairingCore.Action]) {
        for action in actions {
            switch action {
            case .dial(let id, let candidate, let path, let offer):
                driver.dial(id, candidate, path: path, subprotocols: offer)
            case .send(let id, let frame): driver.send(frame, on: id)
            case .close(let id): driver.close(id)
            case .paired(let result, let candidate): finish(.success((result, candidate)))
            case .failed(let failure): finish(.failure(message(failure)))
            }
        }
    }

    func message(_ failure: PairingCore.Failure) -> ClientError {
        switch failure {
        case .refused:
            return CodeMessages.refused(expiry: codeExpiry)
        case .closed:
            return ClientError("pairing failed: the desktop closed the connection",
                               hint: "run `speakbridge pair` on the desktop for a new code")
        case .unreachable(let reason):
            return ClientError("pairing failed: cannot reach the desktop (\(reason))",
                               hint: "check the network, or give the address with --address HOST:PORT")
        case .timedOut(let failures):
            let detail = failures.isEmpty ? "" : " (\(failures))"
            return ClientError("the desktop did not complete pairing within \(Int(timeoutSeconds)) s\(detail)",
                               hint: "check that `speakbridge serve` runs and that its port is reachable from here")
        }
    }

    func finish(_ result: Result<(PairingResult, Candidate), ClientError>) {
        guard outcome == nil else { return }
        outcome = result
        driver.stopFinding()
        step { $0.hangUp() }
        done.signal()
    }
}
