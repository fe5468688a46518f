// libqrencode, loaded on first use (see SharedLibrary in SpeakBridgeSupport for why and how).
internal import CQREncode
import SpeakBridgeSupport

/// The libqrencode functions SpeakBridgeQR calls, resolved from libqrencode.so.4 the first time a QR code is made.
enum LibQREncode {
    static let soname = "libqrencode.so.4"
    static let package = "libqrencode4"
    static let withoutIt = "pairing codes are shown as text only (speakbridge join CODE still works)"

    /// Loaded once, thread-safely (a `static let` is initialized by swift_once); a failure is kept, not retried.
    static let shared: Result<sb_qrencode_api, SharedLibraryError> = load(soname: soname)

    /// Opens `soname` (a parameter so tests can ask for one that does not exist) and resolves every symbol.
    static func load(soname: String) -> Result<sb_qrencode_api, SharedLibraryError> {
        SharedLibrary.load(soname: soname, package: package, withoutIt: withoutIt) { sb_qrencode_resolve($0, $1) }
    }

    /// Why `soname` cannot serve as this library, or nil when it loads and every symbol resolves (for tests).
    static func loadError(soname: String) -> SharedLibraryError? {
        if case .failure(let error) = load(soname: soname) { return error }
        return nil
    }
}
