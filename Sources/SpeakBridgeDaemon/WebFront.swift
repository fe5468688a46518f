// The browser route: the daemon's own HTTPS/WSS listener (the "browser front") that serves the static page in Web/
// and takes the protocol over WSS with the AESGCM cipher (PROTOCOL.md, "Browser route").
//
// Flow:
// 1. `WebFront.prepare` (before the WebSocket server starts) decides whether the route can be offered at all:
//    not `--no-web`, AES-GCM available (AES-NI), the page's files found. Any "no" is a reason shown by `status`
//    and logged once; the native route is unaffected. (The server accepts the AESGCM subprotocol wherever the CPU
//    has AES-NI, on the native listener too: `Daemon`.)
// 2. The front itself starts lazily (`start`), so that a desktop without browser devices never initialises OpenSSL
//    (about 4 MiB resident) and has no TLS listener: at daemon start when a browser device is paired (its page
//    reconnects at once after a restart), or when `pair --web` asks for a code (before the URL is shown; a front
//    that cannot start is a clear error there). Starting checks the page's files first (WebRoot: the root, the
//    directories above it and every file in it such that no other user could change them; served as resolved
//    there), makes the certificate ready (WebCertificate: self-signed P-256, made once per identity, re-issued when
//    the listening addresses change), then asks the server for its TLS listener. A failed start leaves the front "not started" with the reason; the next `pair --web` retries.
//    Once listening it stays until the daemon stops, even when the last browser device is revoked (a revoked
//    page must still load to say so).
// 3. Per connection, `route(for:on:)` tells the core (DesktopCore, which never sees lws) the Noise cipher the
//    negotiated subprotocol chose and whether it came through the TLS listener (a pairing on it is a `browser`
//    device, saved with its user agent in short). The core decides the rest (browser devices get no config).
import FoundationEssentials
import SpeakBridgeControl
import SpeakBridgeCrypto
import SpeakBridgeDesktopCore
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport
import SpeakBridgeTLS
import SpeakBridgeWebSocket

/// `serve --web-port` / `--no-web` / `--web-root`.
public struct WebFrontOptions: Sendable {
    public var enabled = true
    /// nil: the main port + 1 (47811 by default), or any free port when the main port is 0.
    public var port: Int?
    /// nil: SPEAKBRIDGE_WEB_ROOT, then <prefix>/share/speakbridge/web next to the binary, then the source tree's Web/.
    public var root: String?

    public init() {}
}

final class WebFront: Sendable {
    /// Why a start failed, and what to do about it.
    struct Failure: Error, Sendable {
        var message: String
        var hint: String
        /// The certificate, when the failure came after it was ready (a listener that came up after a timeout is
        /// then still reported truthfully).
        var certificate: WebCertificate?
    }

    enum Phase: Sendable {
        /// Never offered by this daemon: why (`--no-web`, no AES-NI, no page files).
        case off(String)
        /// Offered, not listening: no browser device paired yet, or the last start failed.
        case notStarted(Failure?)
        case listening(WebCertificate, port: Int)
    }

    /// Where the front starts: the daemon's home and identity (for the certificate), address and TLS port.
    struct Settings: Sendable {
        var home: Home
        var identity: String
        var host: String
        var port: Int
        var root: String
    }

    private let settings: Settings?
    private let phase: Locked<Phase>
    /// Held for a whole start: a second `pair --web` waits for the first one's attempt, then sees its outcome.
    private let starting = ThreadLock()

    /// The Content-Security-Policy of every response: nothing from elsewhere, no inline script or style, no
    /// framing; WebSockets only back to this origin.
    static let headers: [(name: String, value: String)] = [
        ("content-security-policy:", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
            + "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
        ("x-content-type-options:", "nosniff"),
        ("referrer-policy:", "no-referrer"),
        ("cross-origin-opener-policy:", "same-origin"),
    ]

    private init(_ phase: Phase, settings: Settings?) {
        self.phase = Locked(phase)
        self.settings = settings
    }

    /// Decides whether the route is offered (flow, step 1).
    static func prepare(_ options: DaemonOptions, identity: Identity) -> WebFront {
        let web = options.web
        guard web.enabled else { return WebFront(.off(disabledReason), settings: nil) }
        guard NoiseCipher.aesGCM.isAvailable else {
            return off("this CPU has no AES-NI (or SPEAKBRIDGE_NO_AESGCM is set), and libsodium's AES-256-GCM (the only "
                       + "cipher browsers have) needs it")
        }
        guard let root = findRoot(web.root) else {
            return off("the page's files were not found (looked for index.html in \(rootCandidates(web.root).joined(separator: ", ")))")
        }
        let port = web.port ?? (options.port == 0 ? 0 : min(options.port + 1, 65535))
        return WebFront(.notStarted(nil), settings: Settings(home: options.home, identity: identity.deviceID.description,
                                                            host: options.host, port: port, root: root))
    }

    static let disabledReason = "disabled (--no-web)"

    private static func off(_ reason: String) -> WebFront {
        Console.warning("the browser route (serve's HTTPS page) is off: \(reason)")
        return WebFront(.off(reason), settings: nil)
    }

    /// The route can be started (it is not off).
    var isOffered: Bool { settings != nil }

    /// Starts the front unless it listens already (flow, step 2); nil once it listens, else why not.
    @discardableResult
    func start(on server: WebSocketServer) -> Failure? {
        starting.withLock { () -> Failure? in
            switch phase.withLock({ $0 }) {
            case let .off(reason):
                return Failure(message: reason, hint: "")
            case .listening:
                return nil
            case .notStarted:
                break
            }
            guard let settings else { return Failure(message: "the route is not offered", hint: "") }
            let outcome = Self.listen(settings, on: server)
            phase.withLock { phase in
                switch outcome {
                case let .success((certificate, port)): phase = .listening(certificate, port: port)
                case let .failure(failure): phase = .notStarted(failure)
                }
            }
            switch outcome {
            case let .success((certificate, port)):
                let address = preferredAddress(host: settings.host, certificate: certificate)
                Console.info("browser front listening on \(url(host: address, port: port))")
                return nil
            case let .failure(failure):
                Console.warning("the browser front did not start: \(failure.message)")
                return failure
            }
        }
    }

    /// The page's files (WebRoot: no file or directory another user could change), the certificate, then the TLS
    /// listener.
    private static func listen(_ settings: Settings, on server: WebSocketServer) -> Result<(WebCertificate, Int), Failure> {
        let root: String
        do throws(StoreError) {
            root = try WebRoot.check(settings.root)
        } catch {
            return .failure(Failure(message: "the page's files cannot be trusted: \(error.message)",
                                    hint: error.hint ?? "see SECURITY.md, \"The browser route\""))
        }
        let addresses = NetworkAddresses.forListening(host: settings.host).map(\.description)
        let certificate: WebCertificate
        do {
            certificate = try WebCertificate.prepare(home: settings.home, identity: settings.identity,
                                                     addresses: addresses.isEmpty ? [settings.host] : addresses)
        } catch {
            var hint = "check web-cert.pem, web-key.pem and web-cert.meta in \(settings.home.config); "
                + "removing all three makes a new certificate at the next start"
            if case let .store(stored) = error, let own = stored.hint { hint = own }
            return .failure(Failure(message: error.description, hint: hint))
        }
        if certificate.rotated {
            Console.info("web certificate issued for \(certificate.addresses.joined(separator: ", ")); SHA-256 \(certificate.fingerprint)")
        }
        let secure = SecureListenerConfiguration(port: settings.port, certificatePath: certificate.certificatePath,
                                                 privateKeyPath: certificate.privateKeyPath,
                                                 documentRoot: root, headers: headers)
        do throws(WebSocketError) {
            return .success((certificate, try server.startSecureListener(secure)))
        } catch {
            let hint: String
            if case .bindFailed = error {
                hint = "choose a free port with `speakbridge serve --web-port PORT` (or stop what holds port \(settings.port))"
            } else {
                hint = "see the daemon's log"
            }
            return .failure(Failure(message: error.description, hint: hint, certificate: certificate))
        }
    }

    static func rootCandidates(_ explicit: String?) -> [String] {
        if let explicit { return [explicit] }
        var list: [String] = []
        if let env = ProcessInfo.processInfo.environment["SPEAKBRIDGE_WEB_ROOT"], !env.isEmpty { list.append(env) }
        // The running binary itself (argv[0] may be a bare name found through PATH).
        let path = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments.first ?? ""
        let exe = URL(fileURLWithPath: path).resolvingSymlinksInPath().deletingLastPathComponent()
        list.append(exe.appendingPathComponent("../share/speakbridge/web").standardized.path)
        // A binary built in the source tree (.build/<config>/speakbridge or .build/<triple>/<config>/speakbridge).
        list.append(exe.appendingPathComponent("../../Web").standardized.path)
        list.append(exe.appendingPathComponent("../../../Web").standardized.path)
        return list
    }

    static func findRoot(_ explicit: String?) -> String? {
        rootCandidates(explicit).first { FileManager.default.fileExists(atPath: $0 + "/index.html") }
    }

    /// What the core needs to know of a connection: the Noise cipher its subprotocol chose, and `browser` (with
    /// the user agent in short) when it came through the TLS listener. On the lws thread (the `opened` event).
    static func route(for id: WebSocketConnectionID, on server: WebSocketServer) -> ConnectionRoute {
        guard let info = server.info(of: id) else { return .native }
        let cipher = SpeakBridgeProtocol.cipher(forSubprotocol: info.subprotocol) ?? .chaChaPoly
        guard info.isSecure else { return ConnectionRoute(cipher: cipher, kind: .native) }
        return ConnectionRoute(cipher: cipher, kind: .browser, agent: UserAgent.short(info.userAgent))
    }

    /// `status --json`'s `web` object: off and why, not started and why, or listening with its page.
    func status(host: String, server: WebSocketServer) -> StatusReply.Web {
        switch phase.withLock({ $0 }) {
        case let .off(reason):
            return .off(reason)
        case let .notStarted(failure):
            // A listener that came up after its start timed out is listening all the same.
            if let certificate = failure?.certificate, let port = server.securePort {
                return listening(certificate, port: port, host: host)
            }
            let reason = failure.map { "the last start failed: \($0.message)" }
                ?? "no browser device paired; `speakbridge pair --web` starts it"
            return .notStarted(reason)
        case let .listening(certificate, port):
            return listening(certificate, port: port, host: host)
        }
    }

    private func listening(_ certificate: WebCertificate, port: Int, host: String) -> StatusReply.Web {
        StatusReply.Web(enabled: true, listening: true,
                        url: url(host: preferredAddress(host: host, certificate: certificate), port: port),
                        port: Int64(port), fingerprint: certificate.fingerprint, spki: certificate.spkiHash,
                        addresses: certificate.addresses)
    }

    /// `pair --web`: starts the front (before any code or URL is issued); the refusal when it is off or cannot start.
    func startForPairing(server: WebSocketServer) -> ControlFailure? {
        if case let .off(reason) = phase.withLock({ $0 }) {
            let hint = reason == Self.disabledReason
                ? "the daemon runs with --no-web: restart it without that flag to pair a browser, or pair a native client with `speakbridge pair` (no --web)"
                : "pair a native client with `speakbridge pair` (no --web)"
            return ControlFailure("this desktop does not offer the browser route: \(reason)", hint: hint)
        }
        guard let failure = start(on: server) else { return nil }
        return ControlFailure("the browser front (the HTTPS page) cannot start: \(failure.message)", hint: failure.hint)
    }

    /// `pair --web`'s part of the reply: the page URL with the code in its fragment (which never leaves the
    /// phone), and the certificate's fingerprint to compare. nil unless the front listens.
    func pairing(code: String, host: String) -> PairReply.Web? {
        guard case let .listening(certificate, port) = phase.withLock({ $0 }) else { return nil }
        let address = preferredAddress(host: host, certificate: certificate)
        // The page dials its own origin and never reads the code's addresses: without them the QR is smaller.
        var short = code
        if var parsed = try? PairingCode.parse(code), !parsed.addresses.isEmpty {
            parsed.addresses = []
            short = parsed.encoded()
        }
        return PairReply.Web(url: url(host: address, port: port) + "#" + short, code: short,
                             fingerprint: certificate.fingerprint)
    }

    /// The address a phone should open: the first the daemon listens on (non-loopback first).
    func preferredAddress(host: String, certificate: WebCertificate? = nil) -> String {
        NetworkAddresses.forListening(host: host).first?.description ?? certificate?.addresses.first ?? host
    }

    func url(host: String, port: Int) -> String {
        "https://" + (host.contains(":") ? "[\(host)]" : host) + ":\(port)/"
    }
}

/// A user agent in short, e.g. "Chrome 156 on Android" — for `devices`, never parsed for decisions.
enum UserAgent {
    static func short(_ agent: String) -> String {
        let browsers = [("Edg/", "Edge"), ("Firefox/", "Firefox"), ("HeadlessChrome/", "Headless Chrome"),
                        ("Chrome/", "Chrome"), ("Version/", "Safari")]
        var name = "browser"
        for (token, label) in browsers {
            if let range = agent.firstRange(of: token) {
                let version = agent[range.upperBound...].prefix { $0.isNumber }
                name = version.isEmpty ? label : "\(label) \(version)"
                break
            }
        }
        let systems = [("Android", "Android"), ("iPhone", "iOS"), ("iPad", "iPadOS"), ("Windows", "Windows"),
                       ("Mac OS X", "macOS"), ("CrOS", "ChromeOS"), ("Linux", "Linux")]
        let system = systems.first { agent.contains($0.0) }?.1
        return PeerText.escape(system.map { "\(name) on \($0)" } ?? name, limit: 64)
    }
}
