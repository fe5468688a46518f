import ArgumentParser
import SpeakBridgeControl
import SpeakBridgeDaemon
import SpeakBridgeProtocol

/// `serve`'s options for the browser route (the HTTPS page and WSS listener, Sources/SpeakBridgeDaemon/WebFront.swift).
struct WebServeOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Port of the HTTPS page for browsers (default: the --listen port + 1; any free port when that is 0).",
        valueName: "PORT"))
    var webPort: Int?

    @Flag(name: .customLong("no-web"), help: ArgumentHelp(
        "Do not serve the HTTPS page for browsers.",
        discussion: "Without this flag the page starts once a browser device is paired or `pair --web` asks for it."))
    var noWeb = false

    @Option(name: .long, help: ArgumentHelp("Directory of the page's files (default: found next to the binary).",
                                            valueName: "DIR"))
    var webRoot: String?

    func validate() throws {
        if let webPort, !(0...65_535).contains(webPort) {
            throw ValidationError("--web-port must be between 0 and 65535")
        }
    }

    var resolved: WebFrontOptions {
        var options = WebFrontOptions()
        options.enabled = !noWeb
        options.port = webPort
        options.root = webRoot
        return options
    }
}

/// `pair --web`: the QR of the page's URL with the code in its fragment.
enum WebPairing {
    /// The text the QR carries: the scheme in capitals, so that a QR encoder can put all but "#" in its compact
    /// alphanumeric mode (schemes are case-insensitive; the address and the code are already in that set).
    static func qrText(_ url: String) -> String {
        url.hasPrefix("https://") ? "HTTPS://" + url.dropFirst("https://".count) : url
    }
}

/// `status`'s lines about the browser route: off, not started (and why), or its page and certificate.
enum WebStatusLines {
    static func lines(_ web: StatusReply.Web?) -> [String] {
        guard let web else { return [] }
        guard web.enabled else { return ["web page: off (\(web.reason ?? "?"))"] }
        if web.listening == false { return ["web page: not started (\(web.reason ?? "?"))"] }
        return ["web page: \(web.url ?? "?") (pair a browser with `speakbridge pair --web`)",
                "web certificate SHA-256: \(web.fingerprint ?? "?")"]
    }
}
