// The avahi-client loader (LibAvahi, over SharedLibrary): avahi is dlopened on first use, not linked.
// Real dlopen on this machine's libraries; an absent library is a soname that no package ships.
@testable import SpeakBridgeDiscovery
import SpeakBridgeSupport
import Testing

@Suite("avahi-client loaded on first use")
struct LibAvahiLoaderTests {
    @Test("the installed libavahi-client.so.3 loads and every symbol discovery calls resolves")
    func presentResolves() {
        #expect(LibAvahi.loadError(soname: LibAvahi.soname) == nil)
        if case .failure(let error) = LibAvahi.shared { Issue.record("shared: \(error)") }
    }

    @Test("a missing library is a typed error naming the soname, the Debian package and what still works")
    func missingNamesThePackage() throws {
        let error = try #require(LibAvahi.loadError(soname: "libspeakbridge-absent-avahi.so.3"))
        guard case .cannotOpen(let why) = error.reason else {
            Issue.record("reason \(error.reason)")
            return
        }
        #expect(why.contains("libspeakbridge-absent-avahi.so.3"))
        #expect(error.package == "libavahi-client3")
        #expect(error.hint.contains("install the Debian package libavahi-client3"))
        #expect(error.hint.contains("known addresses"), "says what works without it: \(error.hint)")
        // What `discover` prints (error + hint).
        let discovery = DiscoveryError.libraryMissing(error)
        #expect(discovery.description == "mDNS is unavailable: \(error.description)")
        #expect(discovery.hint == error.hint)
    }

    @Test("a library without the functions fails at load, naming the first missing symbol")
    func missingSymbolFailsAtLoad() throws {
        // avahi-common has the threaded poll (the table's first entries) but not avahi_client_new.
        let error = try #require(LibAvahi.loadError(soname: "libavahi-common.so.3"))
        #expect(error.reason == .missingSymbol("avahi_client_new"))
    }
}
