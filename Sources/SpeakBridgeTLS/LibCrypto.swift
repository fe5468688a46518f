// OpenSSL's libcrypto, loaded on first use (see SharedLibrary in SpeakBridgeSupport for why and how).
internal import COpenSSL
import SpeakBridgeSupport

/// The libcrypto functions the web certificate's C helpers call (COpenSSL's shim.h), resolved from libcrypto.so.3
/// the first time `WebCertificate.prepare` runs: when the browser route's front starts. A process that never
/// starts it (`send`, `--version`, a daemon without browser devices, …) never loads libcrypto for it.
enum LibCrypto {
    static let soname = "libcrypto.so.3"
    static let package = "libssl3"
    static let withoutIt = "the browser route (serve's HTTPS page) cannot start; everything else works"

    /// Loaded once, thread-safely (a `static let` is initialized by swift_once); a failure is kept, not retried.
    static let shared: Result<sb_crypto_api, SharedLibraryError> = load(soname: soname)

    /// Opens `soname` (a parameter so tests can ask for one that does not exist) and resolves every symbol.
    static func load(soname: String) -> Result<sb_crypto_api, SharedLibraryError> {
        SharedLibrary.load(soname: soname, package: package, withoutIt: withoutIt) { sb_crypto_resolve($0, $1) }
    }

    /// Why `soname` cannot serve as this library, or nil when it loads and every symbol resolves. Without C types,
    /// so that tests (which do not see the C leaf's headers) can check the loader with present and absent sonames.
    static func loadError(soname: String) -> SharedLibraryError? {
        if case .failure(let error) = load(soname: soname) { return error }
        return nil
    }
}
