#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeStore
import Testing
@testable import SpeakBridgeTLS

/// The fingerprint the page and `serve` show (and web-cert.meta keeps) is the one OpenSSL prints for the
/// certificate: SHA-256 of the DER, uppercase hex pairs joined by ":" (issue 13 replaced String(format:) here).
@Suite("Web certificate fingerprint")
struct WebCertificateFingerprintTests {
    @Test func fingerprintIsWhatOpenSSLPrints() throws {
        let root = "/tmp/sb-certfp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let home = Home.resolve(override: root, environment: [:])
        let certificate = try WebCertificate.prepare(home: home, identity: "AAAA-BBBB-CCCC-DDDD", addresses: ["127.0.0.1"])

        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")  // `make test` installs openssl
        openssl.arguments = ["x509", "-noout", "-fingerprint", "-sha256", "-in", certificate.certificatePath]
        let output = Pipe()
        openssl.standardOutput = output
        try openssl.run()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        openssl.waitUntilExit()
        #expect(openssl.terminationStatus == 0)
        // "sha256 Fingerprint=AB:CD:…" (older OpenSSL: "SHA256 Fingerprint=…")
        let expected = printed.split(separator: "=", maxSplits: 1).last.map { $0.trimmingCharacters(in: .newlines) }
        #expect(certificate.fingerprint == expected)
        #expect(certificate.fingerprint.count == 32 * 3 - 1)
    }
}
