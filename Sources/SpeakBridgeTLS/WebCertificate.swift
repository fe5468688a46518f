// The desktop's self-signed web certificate (ECDSA P-256), for the browser route's HTTPS/WSS listener.
//
// Flow of `prepare`:
// 1. Read the metadata file (identity, addresses, expiry, fingerprints). Keep the certificate when it was made for
//    this identity, lists exactly the addresses the daemon listens on now, and has more than 30 days left.
// 2. Otherwise: reuse the key when the identity is the same (so the key a user or test pinned survives an
//    address change), else make a new one; issue a certificate whose subjectAltName lists every address;
//    write key, certificate and metadata 0600 (atomic replace, O_NOFOLLOW — FileIO).
// Files: config/web-key.pem, config/web-cert.pem, config/web-cert.meta.
internal import COpenSSL
#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import SpeakBridgeCrypto
import SpeakBridgeStore

public struct WebCertificate: Sendable {
    public var certificatePath: String
    public var privateKeyPath: String
    /// SHA-256 of the DER certificate, as browsers show it: upper-case hex pairs joined by ":".
    public var fingerprint: String
    /// Base64 of SHA-256 over the DER SubjectPublicKeyInfo (what Chromium's --ignore-certificate-errors-spki-list
    /// and HPKP-style pins take). Stable while the identity is.
    public var spkiHash: String
    public var addresses: [String]
    /// True when `prepare` issued a new certificate (first start, new addresses, new identity, near expiry).
    public var rotated: Bool

    static let validityDays = 397
    static let renewBeforeSeconds: TimeInterval = 30 * 86_400

    public enum Failure: Error, CustomStringConvertible {
        case openSSL(String)
        case store(StoreError)
        public var description: String {
            switch self {
            case .openSSL(let what): "cannot make the web certificate: OpenSSL failed to \(what)"
            case .store(let error): error.description
            }
        }
    }

    /// Loads the certificate for `identity` and `addresses`, or issues a new one (see the flow above).
    public static func prepare(home: Home, identity: String, addresses: [String],
                               now: Date = Date()) throws(Failure) -> WebCertificate {
        let keyPath = home.config + "/web-key.pem"
        let certPath = home.config + "/web-cert.pem"
        let metaPath = home.config + "/web-cert.meta"
        let wanted = Array(Set(addresses)).sorted()
        try store { () throws(StoreError) in try home.prepare() }
        let meta = try store { () throws(StoreError) in try FileIO.read(metaPath) }
            .flatMap { Meta(text: String(decoding: $0, as: UTF8.self)) }
        // Both files are read through FileIO's checks (a regular file of this user, mode 0600, no symlink) before
        // OpenSSL is given their paths: a key left readable by others (a backup restored 0644) is refused, not
        // served, as identity.key would be.
        var existingKey = try store { () throws(StoreError) in
            try FileIO.read(keyPath, leaked: "delete it and web-cert.pem (a new key and certificate are made; browsers "
                                + "that trusted the old certificate ask again)")
        }
        defer { if existingKey != nil { SecretMemory.wipe(&existingKey!) } }
        let haveCert = try store { () throws(StoreError) in try FileIO.read(certPath) } != nil
        if let meta, meta.identity == identity, meta.addresses == wanted,
           meta.notAfter - now.timeIntervalSince1970 > renewBeforeSeconds, existingKey != nil, haveCert {
            return WebCertificate(certificatePath: certPath, privateKeyPath: keyPath, fingerprint: meta.fingerprint,
                                  spkiHash: meta.spki, addresses: wanted, rotated: false)
        }
        var keyPEM: [UInt8]
        if meta?.identity == identity, let existing = existingKey {
            keyPEM = existing
            existingKey = nil  // keyPEM holds the only copy, wiped below
        } else {
            keyPEM = try newKey()
            let fresh = keyPEM
            try store { () throws(StoreError) in try FileIO.atomicWrite(keyPath, fresh) }
        }
        defer { SecretMemory.wipe(&keyPEM) }
        let issued = try issue(keyPEM: keyPEM, commonName: "SpeakBridge \(identity)", addresses: wanted)
        let notAfter = now.timeIntervalSince1970 + TimeInterval(validityDays * 86_400)
        let newMeta = Meta(identity: identity, addresses: wanted, notAfter: notAfter,
                           fingerprint: issued.fingerprint, spki: issued.spki)
        try store { () throws(StoreError) in
            try FileIO.atomicWrite(certPath, issued.pem)
            try FileIO.atomicWrite(metaPath, Array(newMeta.text.utf8))
        }
        return WebCertificate(certificatePath: certPath, privateKeyPath: keyPath, fingerprint: issued.fingerprint,
                              spkiHash: issued.spki, addresses: wanted, rotated: true)
    }

    private static func store<T>(_ body: () throws(StoreError) -> T) throws(Failure) -> T {
        do { return try body() } catch { throw .store(error) }
    }

    static func newKey() throws(Failure) -> [UInt8] {
        var pem: UnsafeMutablePointer<CChar>?
        var length = 0
        guard sb_ec_key_pem(&pem, &length) == 1, let pem else { throw .openSSL("generate a P-256 key") }
        // The buffer holds the private key: copy it out, then wipe and free it.
        defer { memset(pem, 0, length); free(pem) }
        return Array(UnsafeRawBufferPointer(start: pem, count: length))
    }

    static func issue(keyPEM: [UInt8], commonName: String,
                      addresses: [String]) throws(Failure) -> (pem: [UInt8], fingerprint: String, spki: String) {
        // Only IP literals reach here (the daemon's listening addresses); anything else would be config syntax.
        let san = addresses.filter(isIPLiteral).map { "IP:" + $0 }.joined(separator: ",")
        guard !san.isEmpty else { throw .openSSL("name any address (no IP literal to certify)") }
        var certPEM: UnsafeMutablePointer<CChar>?
        var certPEMLength = 0
        var certDER: UnsafeMutablePointer<UInt8>?
        var certDERLength: Int32 = 0
        var spkiDER: UnsafeMutablePointer<UInt8>?
        var spkiDERLength: Int32 = 0
        let ok = keyPEM.withUnsafeBufferPointer { key in
            key.withMemoryRebound(to: CChar.self) { key in
                sb_self_signed(key.baseAddress, key.count, commonName, san, Int(validityDays),
                               &certPEM, &certPEMLength, &certDER, &certDERLength, &spkiDER, &spkiDERLength)
            }
        }
        defer {
            free(certPEM)
            sb_openssl_free(certDER)
            sb_openssl_free(spkiDER)
        }
        guard ok == 1, let certPEM, let certDER, let spkiDER else { throw .openSSL("issue a certificate") }
        let pem = Array(UnsafeRawBufferPointer(start: certPEM, count: certPEMLength))
        let der = Array(UnsafeBufferPointer(start: certDER, count: Int(certDERLength)))
        let spki = Array(UnsafeBufferPointer(start: spkiDER, count: Int(spkiDERLength)))
        let fingerprint = SHA256.hash(der).map { upperHex($0) }.joined(separator: ":")
        return (pem, fingerprint, Data(SHA256.hash(spki)).base64EncodedString())
    }

    static func isIPLiteral(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    /// The metadata file: one `key=value` per line.
    struct Meta {
        var identity: String
        var addresses: [String]
        var notAfter: TimeInterval
        var fingerprint: String
        var spki: String

        init(identity: String, addresses: [String], notAfter: TimeInterval, fingerprint: String, spki: String) {
            self.identity = identity
            self.addresses = addresses
            self.notAfter = notAfter
            self.fingerprint = fingerprint
            self.spki = spki
        }

        init?(text: String) {
            var fields: [String: String] = [:]
            for line in text.split(separator: "\n") {
                guard let eq = line.firstIndex(of: "=") else { return nil }
                fields[String(line[..<eq])] = String(line[line.index(after: eq)...])
            }
            guard let identity = fields["identity"], let addresses = fields["addresses"],
                  let notAfter = fields["notAfter"].flatMap(TimeInterval.init), let fingerprint = fields["fingerprint"],
                  let spki = fields["spki"] else { return nil }
            self.init(identity: identity, addresses: addresses.split(separator: ",").map(String.init),
                      notAfter: notAfter, fingerprint: fingerprint, spki: spki)
        }

        var text: String {
            "identity=\(identity)\naddresses=\(addresses.joined(separator: ","))\nnotAfter=\(Int(notAfter))\n"
                + "fingerprint=\(fingerprint)\nspki=\(spki)\n"
        }
    }
}

/// "0A": a byte as two uppercase hex digits (the fingerprint's format, as browsers show it).
private func upperHex(_ byte: UInt8) -> String {
    let digits: [Character] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "A", "B", "C", "D", "E", "F"]
    return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
}
