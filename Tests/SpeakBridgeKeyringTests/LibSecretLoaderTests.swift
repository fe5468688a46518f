// The libsecret loader (LibSecret, over SharedLibrary): libsecret is dlopened on first use, not linked.
// Real dlopen on this machine's libraries; an absent library is a soname that no package ships.
@testable import SpeakBridgeKeyring
import SpeakBridgeSupport
import Testing

@Suite("libsecret loaded on first use")
struct LibSecretLoaderTests {
    @Test("the installed libsecret-1.so.0 loads and every symbol the keyring calls resolves")
    func presentResolves() {
        #expect(LibSecret.loadError(soname: LibSecret.soname) == nil)
        if case .failure(let error) = LibSecret.shared { Issue.record("shared: \(error)") }
    }

    @Test("a missing library is a typed error naming the soname, the Debian package and what still works")
    func missingNamesThePackage() throws {
        let error = try #require(LibSecret.loadError(soname: "libspeakbridge-absent-secret.so.0"))
        guard case .cannotOpen(let why) = error.reason else {
            Issue.record("reason \(error.reason)")
            return
        }
        #expect(why.contains("libspeakbridge-absent-secret.so.0"))
        #expect(error.package == "libsecret-1-0")
        #expect(error.description.hasPrefix("cannot load libspeakbridge-absent-secret.so.0"))
        #expect(error.hint.contains("install the Debian package libsecret-1-0"))
        #expect(error.hint.contains("secrets.json"), "says what works without it: \(error.hint)")
        // What the keyring shows (the config layer adds `error.hint` as its hint).
        let keyring = KeyringError.libraryMissing(error)
        #expect(keyring.description == "no Secret Service: \(error.description)")
    }

    @Test("a library without the functions fails at load, naming the first missing symbol")
    func missingSymbolFailsAtLoad() throws {
        // glib is a real library that lacks libsecret's functions (the first in the table).
        let error = try #require(LibSecret.loadError(soname: "libglib-2.0.so.0"))
        #expect(error.reason == .missingSymbol("secret_password_storev_sync"))
        #expect(error.description.contains("lacks secret_password_storev_sync"))
    }
}
