// libwebsockets, loaded on first use (see SharedLibrary in SpeakBridgeSupport for why and how, and the comment atop
// CLibWebSockets/shim.h for what it saves at every start).
//
// Flow:
// 1. A loop's service thread takes `shared` before it creates its context (`ServiceLoop.createContext`), so the
//    thread that started the loop goes on meanwhile: a `send` starts its socket thread first thing and reads its
//    identity, peers and journal while the library loads. A failure becomes `WebSocketError.libraryMissing`.
// 2. Every lws call after that goes through `lws`, the loaded table: only code that runs once a context exists
//    calls it, and a context exists only after a successful load.
internal import CLibWebSockets
import SpeakBridgeSupport

/// The libwebsockets functions SpeakBridgeWebSocket calls, resolved from libwebsockets.so.17 (which brings libssl
/// and libcrypto with it).
enum LibWebSockets {
    static let soname = "libwebsockets.so.17"
    static let package = "libwebsockets17"
    static let withoutIt = "nothing can connect or listen (pair codes, status and the config files still work)"

    /// Loaded once, thread-safely (a `static let` is initialized by swift_once); a failure is kept, not retried.
    /// The table lives in memory of its own, never freed (the library is never closed either), so that a call reads
    /// one pointer from it instead of copying all of it out of the `Result`.
    static let shared: Result<Table, SharedLibraryError> = load(soname: soname).map { table in
        let stored = UnsafeMutablePointer<sb_lws_api>.allocate(capacity: 1)
        stored.initialize(to: table)
        return Table(pointer: UnsafePointer(stored))
    }

    /// Where the loaded table is.
    ///
    /// `@unchecked Sendable` is sound: the memory is written once, before `shared` publishes it (swift_once orders
    /// that write before every read), and never again nor freed; its fields are code addresses in a library that
    /// is never closed.
    struct Table: @unchecked Sendable {
        let pointer: UnsafePointer<sb_lws_api>
    }

    /// The table, or why libwebsockets cannot be used.
    static func api() throws(SharedLibraryError) -> UnsafePointer<sb_lws_api> {
        try shared.get().pointer
    }

    /// The table, for code that runs only where a context exists (so the load succeeded).
    static var loaded: UnsafePointer<sb_lws_api> {
        guard case let .success(table) = shared else {
            preconditionFailure("libwebsockets called before it was loaded")
        }
        return table.pointer
    }

    /// Opens `soname` (a parameter so tests can ask for one that does not exist) and resolves every symbol.
    static func load(soname: String) -> Result<sb_lws_api, SharedLibraryError> {
        SharedLibrary.load(soname: soname, package: package, withoutIt: withoutIt) { sb_lws_resolve($0, $1) }
    }

    /// Why `soname` cannot serve as this library, or nil when it loads and every symbol resolves. Without C types,
    /// so that tests can check the loader with present and absent sonames.
    package static func loadError(soname: String) -> SharedLibraryError? {
        if case .failure(let error) = load(soname: soname) { return error }
        return nil
    }
}

/// libwebsockets' functions, for code that runs where a context exists (see the flow atop this file):
/// `lws.pointee.lws_write(…)`.
var lws: UnsafePointer<sb_lws_api> { LibWebSockets.loaded }
