// libsecret, loaded on first use (see SharedLibrary in SpeakBridgeSupport for why and how).
#if canImport(Glibc)
import Glibc
#endif
internal import CSecret
import SpeakBridgeSupport

/// The libsecret (and glib/gobject/gio) functions SpeakBridgeKeyring calls, resolved from libsecret-1.so.0 the
/// first time the Secret Service is used. A process that never uses it (send, serve without config transfer,
/// --version, …) never loads it.
enum LibSecret {
    static let soname = "libsecret-1.so.0"
    static let package = "libsecret-1-0"
    static let withoutIt = "secrets are kept in the installation's config/secrets.json (SPEAKBRIDGE_SECRETS=file); "
        + "everything else works"

    /// Loaded once, thread-safely (a `static let` is initialized by swift_once); a failure is kept, not retried.
    static let shared: Result<sb_secret_api, SharedLibraryError> = load(soname: soname)

    /// The table, or why libsecret cannot be used.
    static func api() throws(SharedLibraryError) -> sb_secret_api {
        try shared.get()
    }

    /// Opens `soname` (a parameter so tests can ask for one that does not exist) and resolves every symbol.
    static func load(soname: String) -> Result<sb_secret_api, SharedLibraryError> {
        SharedLibrary.load(soname: soname, package: package, withoutIt: withoutIt) { sb_secret_resolve($0, $1) }
    }

    /// Why `soname` cannot serve as this library, or nil when it loads and every symbol resolves. Without C types,
    /// so that tests (which do not see the C leaf's headers) can check the loader with present and absent sonames.
    static func loadError(soname: String) -> SharedLibraryError? {
        if case .failure(let error) = load(soname: soname) { return error }
        return nil
    }
}
