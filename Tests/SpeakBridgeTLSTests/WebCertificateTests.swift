#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeStore
import Testing
@testable import SpeakBridgeTLS

/// The browser route's self-signed certificate: made once, kept while identity and addresses stay, re-issued with
/// the same key when the addresses change, a new key for a new identity; files 0600; the certificate is what
/// OpenSSL's own tool reads (P-256, every address in subjectAltName).
@Suite("Web certificate")
struct WebCertificateTests {
    let root = "/tmp/sb-cert-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    var home: Home { Home.resolve(override: root, environment: [:]) }

    func cleanup() { try? FileManager.default.removeItem(atPath: root) }

    @Test func keptReissuedAndRekeyedAsItShouldBe() throws {
        defer { cleanup() }
        let first = try WebCertificate.prepare(home: home, identity: "AAAA-BBBB-CCCC-DDDD", addresses: ["127.0.0.1", "192.0.2.7"])
        #expect(first.rotated)
        #expect(first.fingerprint.split(separator: ":").count == 32)
        #expect(Data(base64Encoded: first.spkiHash)?.count == 32)
        for path in [first.certificatePath, first.privateKeyPath, home.config + "/web-cert.meta"] {
            #expect(FileIO.mode(path) == 0o600, "\(path)")
        }
        let same = try WebCertificate.prepare(home: home, identity: "AAAA-BBBB-CCCC-DDDD", addresses: ["192.0.2.7", "127.0.0.1"])
        #expect(!same.rotated)
        #expect(same.fingerprint == first.fingerprint)

        let moved = try WebCertificate.prepare(home: home, identity: "AAAA-BBBB-CCCC-DDDD", addresses: ["127.0.0.1", "198.51.100.3"])
        #expect(moved.rotated)
        #expect(moved.fingerprint != first.fingerprint)
        #expect(moved.spkiHash == first.spkiHash, "the key is kept across an address change")

        let other = try WebCertificate.prepare(home: home, identity: "ZZZZ-BBBB-CCCC-DDDD", addresses: ["127.0.0.1", "198.51.100.3"])
        #expect(other.rotated)
        #expect(other.spkiHash != first.spkiHash, "a new identity gets a new key")

        let text = try openssl(["x509", "-in", other.certificatePath, "-noout", "-text"])
        #expect(text.contains("IP Address:127.0.0.1"))
        #expect(text.contains("IP Address:198.51.100.3"))
        #expect(text.contains("NIST CURVE: P-256") || text.contains("prime256v1"))
        #expect(text.contains("TLS Web Server Authentication"))
    }

    /// A key another user can read (a backup restored 0644, a chmod by mistake) is refused at start, as identity.key
    /// is, instead of being handed to OpenSSL and served; so is a certificate replaced by a symlink.
    @Test func keyOthersCanReadIsRefused() throws {
        defer { cleanup() }
        let first = try WebCertificate.prepare(home: home, identity: "A", addresses: ["127.0.0.1"])
        #expect(chmod(first.privateKeyPath, 0o644) == 0)
        #expect(throws: WebCertificate.Failure.self) {
            _ = try WebCertificate.prepare(home: home, identity: "A", addresses: ["127.0.0.1"])
        }
        #expect(chmod(first.privateKeyPath, 0o600) == 0)
        #expect(unlink(first.certificatePath) == 0)
        #expect(symlink(first.privateKeyPath, first.certificatePath) == 0)
        #expect(throws: WebCertificate.Failure.self) {
            _ = try WebCertificate.prepare(home: home, identity: "A", addresses: ["127.0.0.1"])
        }
    }

    @Test func nearExpiryIsReissued() throws {
        defer { cleanup() }
        let now = Date()
        let first = try WebCertificate.prepare(home: home, identity: "A", addresses: ["127.0.0.1"], now: now)
        let later = now.addingTimeInterval(TimeInterval(WebCertificate.validityDays - 20) * 86_400)
        let renewed = try WebCertificate.prepare(home: home, identity: "A", addresses: ["127.0.0.1"], now: later)
        #expect(renewed.rotated)
        #expect(renewed.fingerprint != first.fingerprint)
    }

    @Test func noAddressIsAClearError() {
        defer { cleanup() }
        #expect(throws: WebCertificate.Failure.self) {
            try WebCertificate.prepare(home: home, identity: "A", addresses: ["not an address"])
        }
    }

    func openssl(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}
