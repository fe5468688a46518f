// The libqrencode loader (LibQREncode, over SharedLibrary): libqrencode is dlopened on first use, not linked.
// Real dlopen on this machine's libraries; an absent library is a soname that no package ships.
@testable import SpeakBridgeQR
import SpeakBridgeSupport
import Testing

@Suite("libqrencode loaded on first use")
struct LibQREncodeLoaderTests {
    @Test("the installed libqrencode.so.4 loads and both functions resolve")
    func presentResolves() throws {
        #expect(LibQREncode.loadError(soname: LibQREncode.soname) == nil)
        #expect(try QRSymbol(encoding: "SB1-TEST").modules.count >= 21)
    }

    @Test("a missing library is a typed error naming the Debian package and what still works")
    func missingNamesThePackage() throws {
        let error = try #require(LibQREncode.loadError(soname: "libspeakbridge-absent-qrencode.so.4"))
        guard case .cannotOpen = error.reason else {
            Issue.record("reason \(error.reason)")
            return
        }
        #expect(error.hint.contains("install the Debian package libqrencode4"))
        #expect(error.hint.contains("text only"))
        // What `pair` prints after "no QR: " (PairingDisplay).
        #expect(QRError.libraryMissing(error).description == error.fullDescription)
    }

    @Test("a library without the functions fails at load, naming the first missing symbol")
    func missingSymbolFailsAtLoad() throws {
        let error = try #require(LibQREncode.loadError(soname: "libc.so.6"))
        #expect(error.reason == .missingSymbol("QRcode_encodeString"))
    }
}
