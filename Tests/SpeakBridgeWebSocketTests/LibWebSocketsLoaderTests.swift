// The libwebsockets loader (LibWebSockets, over SharedLibrary): lws is dlopened by a loop's service thread, not
// linked. Real dlopen on this machine's libraries; an absent library is a soname that no package ships. (The whole
// path with the library missing, `send` and `serve` failing with the package named: Tests/packaging/run.sh.)
@testable import SpeakBridgeWebSocket
import SpeakBridgeSupport
import Testing

@Suite("libwebsockets loaded on first use")
struct LibWebSocketsLoaderTests {
    @Test("the installed libwebsockets.so.17 loads and every symbol the loops call resolves")
    func presentResolves() {
        #expect(LibWebSockets.loadError(soname: LibWebSockets.soname) == nil)
        if case .failure(let error) = LibWebSockets.shared { Issue.record("shared: \(error)") }
    }

    @Test("a missing library is a typed error naming the soname, the Debian package and what still works")
    func missingNamesThePackage() throws {
        let error = try #require(LibWebSockets.loadError(soname: "libspeakbridge-absent-websockets.so.17"))
        guard case .cannotOpen(let why) = error.reason else {
            Issue.record("reason \(error.reason)")
            return
        }
        #expect(why.contains("libspeakbridge-absent-websockets.so.17"))
        #expect(error.package == "libwebsockets17")
        #expect(error.hint.contains("install the Debian package libwebsockets17"))
        #expect(error.hint.contains("status"), "says what works without it: \(error.hint)")
        // What a client or server creation throws, and `send` / `serve` print.
        let thrown = WebSocketError.libraryMissing(error)
        #expect(thrown.description == error.description)
        #expect(thrown.hint == error.hint)
        #expect(WebSocketError.contextCreationFailed("x").hint == nil)
    }

    @Test("a library without the functions fails at load, naming the first missing symbol")
    func missingSymbolFailsAtLoad() throws {
        let error = try #require(LibWebSockets.loadError(soname: "libsodium.so.23"))
        #expect(error.reason == .missingSymbol("lws_create_context"))
    }
}
