// The browser route: the daemon's own HTTPS/WSS listener that serves the static page in Web/ and takes the
// protocol over WSS with the AESGCM cipher (PROTOCOL.md, "Browser route").
//
// Flow:
// 1. `WebFront.prepare` (before the WebSocket server starts) decides whether the route can be offered: AES-GCM
//    available (AES-NI), the page's files found, the certificate ready (WebCertificate: self-signed P-256, made
//    once per identity, re-issued when the listening addresses change). Any "no" is a reason shown by `status`
//    and logged once; the native route is unaffected.
// 2. It adds the TLS listener and the AESGCM subprotocol to the server configuration.
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
    /// Why the route is off, for `status` and the log; nil when it is on.
    let unavailable: String?
    let certificate: WebCertificate?
    let root: String?

    /// The Content-Security-Policy of every response: nothing from elsewhere, no inline script or style, no
    /// framing; WebSockets only back to this origin.
    static let headers: [(name: String, value: String)] = [
        ("content-security-policy:", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
            + "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
        ("x-content-type-options:", "nosniff"),
        ("referrer-policy:", "no-referrer"),
        ("cross-origin-opener-policy:", "same-origin"),
    ]

    init(unavailable: String?, certificate: WebCertificate?, root: String?) {
        self.unavailable = unavailable
        self.certificate = certificate
        self.root = root
    }

    /// Decides whether the route is offered and, if so, adds it to `config` (step 1 and 2 of the flow).
    static func prepare(_ options: DaemonOptions, identity: Identity,
                        config: inout WebSocketServerConfiguration) -> WebFront {
        let web = options.web
        guard web.enabled else { return WebFront(unavailable: "disabled (--no-web)", certificate: nil, root: nil) }
        guard NoiseCipher.aesGCM.isAvailable else {
            return off("this CPU has no AES-NI, and libsodium's AES-256-GCM (the only cipher browsers have) needs it")
        }
        guard let root = findRoot(web.root) else {
            return off("the page's files were not found (looked for index.html in \(rootCandidates(web.root).joined(separator: ", ")))")
        }
        let addresses = NetworkAddresses.forListening(host: options.host).map(\.description)
        let certificate: WebCertificate
        do {
            certificate = try WebCertificate.prepare(home: options.home, identity: identity.deviceID.description,
                                                     addresses: addresses.isEmpty ? [options.host] : addresses)
        } catch {
            return off(error.description)
        }
        if certificate.rotated {
            Console.info("web certificate issued for \(certificate.addresses.joined(separator: ", ")); SHA-256 \(certificate.fingerprint)")
        }
        let port = web.port ?? (options.port == 0 ? 0 : min(options.port + 1, 65535))
        config.extraSubprotocols = [SpeakBridgeProtocol.aesGCMSubprotocol]
        config.secure = SecureListenerConfiguration(port: port, certificatePath: certificate.certificatePath,
                                                    privateKeyPath: certificate.privateKeyPath, documentRoot: root,
                                                    headers: headers)
        return WebFront(unavailable: nil, certificate: certificate, root: root)
    }

    /// Starts the server; when that fails only because of the TLS listener (its port is taken), starts it without
    /// the browser route instead, which `status` then reports as off with the reason (the native route matters more).
    func startServer(_ config: WebSocketServerConfiguration,
                     onEvent: @escaping @Sendable (WebSocketEvent) -> Void) throws -> (WebSocketServer, WebFront) {
        do {
            return (try WebSocketServer(configuration: config, onEvent: onEvent), self)
        } catch let error as WebSocketError where config.secure != nil {
            var plain = config
            plain.secure = nil
            plain.extraSubprotocols = []
            let server = try WebSocketServer(configuration: plain, onEvent: onEvent)
            return (server, Self.off("its port \(config.secure?.port ?? 0) cannot be used (\(error.description)); "
                                     + "choose another with --web-port"))
        }
    }

    private static func off(_ reason: String) -> WebFront {
        Console.warning("the browser route (serve's HTTPS page) is off: \(reason)")
        return WebFront(unavailable: reason, certificate: nil, root: nil)
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

    /// `status --json`'s `web` object.
    func status(host: String, server: WebSocketServer) -> StatusReply.Web {
        guard unavailable == nil, let certificate, let port = server.securePort else {
            return .off(unavailable ?? "the TLS listener did not start")
        }
        return StatusReply.Web(enabled: true, url: url(host: preferredAddress(host: host), port: port),
                               port: Int64(port), fingerprint: certificate.fingerprint, spki: certificate.spkiHash,
                               addresses: certificate.addresses)
    }

    /// `pair --web` on a desktop without the route: the refusal (why, and what to do).
    func pairingRefusal(server: WebSocketServer) -> ControlFailure? {
        if unavailable == nil, server.securePort != nil { return nil }
        return ControlFailure("this desktop does not offer the browser route: \(unavailable ?? "the TLS listener did not start")",
                              hint: "pair a native client with `speakbridge pair` (no --web)")
    }

    /// `pair --web`'s part of the reply: the page URL with the code in its fragment (which never leaves the
    /// phone), and the certificate's fingerprint to compare.
    func pairing(code: String, host: String, server: WebSocketServer) -> PairReply.Web? {
        guard let certificate, let port = server.securePort else { return nil }
        let address = preferredAddress(host: host)
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
    func preferredAddress(host: String) -> String {
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
