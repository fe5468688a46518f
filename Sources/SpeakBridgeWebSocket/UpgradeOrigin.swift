#if canImport(Glibc)
import Glibc
#endif

/// Who may open a WebSocket to the desktop, judged from the upgrade request's `Origin` and `Host` (PROTOCOL.md,
/// Transport: the 403 row). A browser sends `Origin` with every WebSocket upgrade, and any web page the user has
/// open may ask it to dial `ws://DESKTOP:47810/…`: without this rule such a page could send junk as message 1 three
/// times (killing a live pairing code) or hold the per-address slots of the user's own address.
///
/// 1. No `Origin` (native clients: our own lws client, Python's `websockets`): allowed. A web page cannot make a
///    browser leave it out.
/// 2. An `Origin` is allowed only when it is the request's own origin: exactly `http://` + Host on the plain port,
///    `https://` + Host on the TLS port, Host being the `Host` header as sent, port included (ASCII case aside).
///    Python's `websocket-client` sends `Origin: http://HOST:PORT` by default, which passes.
/// 3. And that Host must be a name no attacker can point at the desktop later (DNS rebinding: evil.example first
///    resolving to the attacker's server, whose page then dials "its own" origin, now resolving to the desktop):
///    an IPv4 literal, a bracketed IPv6 literal, `localhost`, or a name ending in `.local` (mDNS, answered on the
///    LAN only), each with an optional `:PORT`. Any other name is refused, even when Origin matches it.
///
/// A value (no lws, no sockets): the service loop hands it the two header values.
enum UpgradeOrigin {
    /// Whether an upgrade with these headers may go on. `origin`/`host`: the header values, nil when absent;
    /// `secure`: the request came through the TLS listener.
    static func allows(origin: String?, host: String?, secure: Bool) -> Bool {
        guard let origin else { return true }
        guard let host, isFixedHost(host) else { return false }
        let expected = (secure ? "https://" : "http://") + host
        return asciiLowercased(origin) == asciiLowercased(expected)
    }

    /// A Host header value that names the desktop by a literal or a local-only name (rule 3), with an optional port.
    static func isFixedHost(_ host: String) -> Bool {
        let bytes = Array(host.utf8)
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return false }
            let inner = String(decoding: bytes[1..<close], as: UTF8.self)
            var address = in6_addr()
            return inet_pton(AF_INET6, inner, &address) == 1 && isPortSuffix(bytes[(close + 1)...])
        }
        let colon = bytes.firstIndex(of: UInt8(ascii: ":")) ?? bytes.endIndex
        guard isPortSuffix(bytes[colon...]) else { return false }
        let name = String(decoding: bytes[..<colon], as: UTF8.self)
        var address = in_addr()
        if inet_pton(AF_INET, name, &address) == 1 { return true }
        let lowered = asciiLowercased(name)
        if lowered == "localhost" { return true }
        return lowered.utf8.count > ".local".utf8.count && lowered.hasSuffix(".local")
            && lowered.utf8.allSatisfy(isNameByte)
    }

    /// Empty, or ":" and 1–5 digits.
    private static func isPortSuffix(_ bytes: ArraySlice<UInt8>) -> Bool {
        guard let first = bytes.first else { return true }
        let digits = bytes.dropFirst()
        return first == UInt8(ascii: ":") && (1...5).contains(digits.count)
            && digits.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// Letters, digits, `-` and `.` (a host name as a browser writes it in an origin).
    private static func isNameByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }

    private static func asciiLowercased(_ text: String) -> String {
        String(decoding: text.utf8.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 | 0x20 : $0 }, as: UTF8.self)
    }
}
