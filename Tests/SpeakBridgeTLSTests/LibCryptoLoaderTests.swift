// The libcrypto loader (LibCrypto, over SharedLibrary): the web certificate's OpenSSL is dlopened on first use, not
// linked. Real dlopen on this machine's libraries; an absent library is a soname that no package ships.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeStore
import SpeakBridgeSupport
import Testing
@testable import SpeakBridgeTLS

@Suite("libcrypto loaded on first use")
struct LibCryptoLoaderTests {
    @Test("the installed libcrypto.so.3 loads and every function the certificate helpers call resolves")
    func presentResolves() {
        #expect(LibCrypto.loadError(soname: LibCrypto.soname) == nil)
        if case .failure(let error) = LibCrypto.shared { Issue.record("shared: \(error)") }
    }

    @Test("a missing library is a typed error naming the soname, the Debian package and what still works")
    func missingNamesThePackage() throws {
        let error = try #require(LibCrypto.loadError(soname: "libspeakbridge-absent-crypto.so.3"))
        guard case .cannotOpen(let why) = error.reason else {
            Issue.record("reason \(error.reason)")
            return
        }
        #expect(why.contains("libspeakbridge-absent-crypto.so.3"))
        #expect(error.package == "libssl3")
        #expect(error.hint.contains("install the Debian package libssl3"))
        #expect(error.hint.contains("browser route"), "says what is lost without it: \(error.hint)")
    }

    @Test("a library without the functions fails at load, naming the first missing symbol")
    func missingSymbolFailsAtLoad() throws {
        let error = try #require(LibCrypto.loadError(soname: "libc.so.6"))
        #expect(error.reason == .missingSymbol("EVP_PKEY_Q_keygen"))
    }

    @Test("prepare without libcrypto throws a failure naming the package, and writes nothing")
    func prepareWithoutTheLibrary() throws {
        let root = "/tmp/sb-certlib-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let home = Home.resolve(override: root, environment: [:])
        let absent = LibCrypto.load(soname: "libspeakbridge-absent-crypto.so.3")
        var thrown: WebCertificate.Failure?
        do {
            _ = try WebCertificate.prepare(home: home, identity: "AAAA-BBBB-CCCC-DDDD", addresses: ["127.0.0.1"],
                                           now: Date(), crypto: absent)
        } catch {
            thrown = error
        }
        let failure = try #require(thrown)
        guard case .libraryMissing(let error) = failure else {
            Issue.record("failure \(failure)")
            return
        }
        #expect(error.soname == "libspeakbridge-absent-crypto.so.3")
        // What `pair --web` and `status` show (WebFront): the description with the package, and a hint.
        #expect(failure.description.hasPrefix("cannot make the web certificate: cannot load libspeakbridge-absent-crypto.so.3"))
        #expect(failure.description.contains("install the Debian package libssl3 (sudo apt install libssl3)"))
        #expect(failure.hint?.contains("restart the daemon") == true)
        #expect(!FileManager.default.fileExists(atPath: home.config + "/web-key.pem"))
        #expect(!FileManager.default.fileExists(atPath: home.config + "/web-cert.pem"))
    }
}
