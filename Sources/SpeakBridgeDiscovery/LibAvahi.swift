// avahi-client, loaded on first use (see SharedLibrary in SpeakBridgeSupport for why and how).
internal import CAvahi
import SpeakBridgeSupport

/// The avahi-client and avahi-common functions SpeakBridgeDiscovery calls, resolved from libavahi-client.so.3 the
/// first time an `MDNSPublisher` or `MDNSBrowser` is made. A process that never uses mDNS (`serve --no-mdns`,
/// `send` to a desktop that answers at its known address, `--version`, …) never loads it.
enum LibAvahi {
    static let soname = "libavahi-client.so.3"
    static let package = "libavahi-client3"
    static let withoutIt = "mDNS is off: desktops are reached at their known addresses and the pairing code's, "
        + "and `serve --no-mdns` needs nothing from it"

    /// Loaded once, thread-safely (a `static let` is initialized by swift_once); a failure is kept, not retried.
    static let shared: Result<sb_avahi_api, SharedLibraryError> = load(soname: soname)

    /// Opens `soname` (a parameter so tests can ask for one that does not exist) and resolves every symbol.
    static func load(soname: String) -> Result<sb_avahi_api, SharedLibraryError> {
        SharedLibrary.load(soname: soname, package: package, withoutIt: withoutIt) { sb_avahi_resolve($0, $1) }
    }

    /// Why `soname` cannot serve as this library, or nil when it loads and every symbol resolves. Without C types,
    /// so that tests (which do not see the C leaf's headers) can check the loader with present and absent sonames.
    static func loadError(soname: String) -> SharedLibraryError? {
        if case .failure(let error) = load(soname: soname) { return error }
        return nil
    }
}
