// A C library opened with dlopen the first time it is needed, instead of being linked.
//
// Why: a linked library is loaded, relocated and bound in every process at start-up, used or not. libsecret and
// avahi-client bring about 20 more libraries with them (glib, gio, gobject, dbus, systemd, gcrypt, libmount, …):
// about a third of the dynamic loader's work for `speakbridge --version` or `send --text`, and several MiB of the
// daemon's resident memory, while only config transfer (libsecret) and mDNS (avahi) use them.
//
// Flow (one loader per library, in the single Swift target that uses it: LibSecret in SpeakBridgeKeyring,
// LibAvahi in SpeakBridgeDiscovery):
//   1. `static let` of the loader (Swift runs it once, thread-safely, on first use) calls `SharedLibrary.open`
//      with the soname including its major version (what the package ships, not the -dev symlink),
//      RTLD_NOW | RTLD_LOCAL: bound at once, and its symbols never leak into the global namespace.
//   2. `resolve` fills the C leaf's table of function pointers (a `static inline` function of its shim.h that
//      dlsyms every symbol the adapter calls): all at once, so a missing symbol fails here, never at a call.
//   3. Failure at either step is a `SharedLibraryError` naming the soname, the Debian package to install and what
//      still works without it. It is kept (the load is not retried) and thrown by every use; nothing crashes.
#if canImport(Glibc)
import Glibc
#endif

/// Why a library could not be loaded, in words a user can act on.
public struct SharedLibraryError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        /// dlopen failed (not installed, or not loadable); the text is dlerror()'s.
        case cannotOpen(String)
        /// The library loaded but lacks a function SpeakBridge calls (a version too old).
        case missingSymbol(String)
    }

    /// The file name asked for, e.g. `libavahi-client.so.3`.
    public var soname: String
    /// The Debian package that ships it, e.g. `libavahi-client3`.
    public var package: String
    /// What still works without the library, e.g. "desktops are reached by address".
    public var withoutIt: String
    public var reason: Reason

    public init(soname: String, package: String, withoutIt: String, reason: Reason) {
        self.soname = soname
        self.package = package
        self.withoutIt = withoutIt
        self.reason = reason
    }

    public var description: String {
        switch reason {
        case .cannotOpen(let why): "cannot load \(soname) (\(why))"
        case .missingSymbol(let name): "\(soname) lacks \(name) (too old a version)"
        }
    }

    /// One line for a `hint:` message: the package, and what works meanwhile.
    public var hint: String {
        "install the Debian package \(package) (sudo apt install \(package)); without it \(withoutIt)"
    }

    /// `description` and `hint` in one sentence, for places that carry a single text.
    public var fullDescription: String { "\(description): \(hint)" }
}

/// An open dlopen handle. Never closed once resolved: the function pointers taken from it live as long as the process.
///
/// `@unchecked Sendable` is sound: `handle` is set once and only passed to dlsym, which is thread-safe.
public struct SharedLibrary: @unchecked Sendable {
    public let soname: String
    public let package: String
    public let withoutIt: String
    let handle: UnsafeMutableRawPointer

    /// dlopens `soname` with RTLD_NOW | RTLD_LOCAL. `package` and `withoutIt` go into any error (see SharedLibraryError).
    public static func open(soname: String, package: String, withoutIt: String) throws(SharedLibraryError) -> SharedLibrary {
        guard let handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL) else {
            let why = dlerror().map { String(cString: $0) } ?? "dlopen failed"
            throw SharedLibraryError(soname: soname, package: package, withoutIt: withoutIt, reason: .cannotOpen(why))
        }
        return SharedLibrary(soname: soname, package: package, withoutIt: withoutIt, handle: handle)
    }

    /// Opens `soname` and resolves every symbol into a `Table` with `resolver`: what each loader's `static let` keeps
    /// (a failure is kept too, not retried).
    public static func load<Table>(
        soname: String, package: String, withoutIt: String,
        _ resolver: (UnsafeMutableRawPointer, UnsafeMutablePointer<Table>) -> UnsafePointer<CChar>?
    ) -> Result<Table, SharedLibraryError> {
        do throws(SharedLibraryError) {
            return .success(try open(soname: soname, package: package, withoutIt: withoutIt).resolve(resolver))
        } catch {
            return .failure(error)
        }
    }

    /// Fills a C table of function pointers with `resolver` (a shim's `sb_*_resolve(handle, table)`, which returns
    /// nil when every symbol was found, else the first missing name). On failure the handle is closed.
    public func resolve<Table>(
        _ resolver: (UnsafeMutableRawPointer, UnsafeMutablePointer<Table>) -> UnsafePointer<CChar>?
    ) throws(SharedLibraryError) -> Table {
        // The table's fields are non-null function pointers, so Swift has no empty value of it: the C side writes
        // into raw storage, which is read (copied out) only when every field was written.
        let storage = UnsafeMutablePointer<Table>.allocate(capacity: 1)
        defer { storage.deallocate() }
        if let missing = resolver(handle, storage) {
            let name = String(cString: missing)
            dlclose(handle)
            throw SharedLibraryError(soname: soname, package: package, withoutIt: withoutIt, reason: .missingSymbol(name))
        }
        return storage.pointee
    }
}
