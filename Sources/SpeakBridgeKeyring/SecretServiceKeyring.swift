#if canImport(Glibc)
import Glibc
#endif
import Dispatch
internal import CSecret
import SpeakBridgeSupport

/// A failure of the Secret Service, in words a user can act on.
public enum KeyringError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No session bus (`DBUS_SESSION_BUS_ADDRESS` unset or empty), or nothing on it answers as
    /// `org.freedesktop.secrets` (no keyring daemon), or it did not answer within the probe's time limit.
    case unavailable(String)
    /// The Secret Service answered with an error (a locked keyring whose prompt was dismissed, a D-Bus failure, …).
    case failed(String)
    /// libsecret itself cannot be loaded (it is opened on first use, not linked): not installed, or too old.
    case libraryMissing(SharedLibraryError)

    public var description: String {
        switch self {
        case .unavailable(let why): "no Secret Service: \(why)"
        case .failed(let why): "Secret Service: \(why)"
        case .libraryMissing(let error): "no Secret Service: \(error.description)"
        }
    }
}

/// SpeakBridge's items in the Secret Service (freedesktop.org spec; gnome-keyring, KeePassXC, KWallet ≥ 5.97),
/// through libsecret's "simple password" API.
///
/// Every item has the schema `org.speakbridge.Secret` (libsecret adds it as the attribute `xdg:schema`) and two
/// attributes: `home`, the installation's config directory, so that several installations on one machine (a
/// "desktop" and a "phone" in tests, or two users of one account) never see each other's secrets, and `ref`, the
/// opaque reference the settings document keeps instead of the value. The label names the installation, never the
/// value. Items go to the default collection (normally "login").
///
/// libsecret is loaded the first time an instance talks to the service (`LibSecret`): `probe` without a session
/// bus, or a process that never uses the keyring, does not load it. Without libsecret every call throws
/// `.libraryMissing`.
///
/// All calls are synchronous D-Bus round trips and may be made from any thread. Reading an item of a locked
/// collection makes the keyring ask the user to unlock it (a desktop prompt); `probe` never does.
///
/// The session bus connection is made not to end the process when the bus goes away (GDBus's default for
/// `g_bus_get` connections is to raise SIGTERM): a daemon outliving its desktop session gets errors instead.
public struct SecretServiceKeyring: Sendable {
    public static let schemaName = "org.speakbridge.Secret"
    /// The value of the `home` attribute.
    public let home: String

    public init(home: String) {
        self.home = home
    }

    /// A keyring for `home` if a Secret Service answers on the session bus: `DBUS_SESSION_BUS_ADDRESS` must be set,
    /// and a search for this installation's items (which never unlocks, so never prompts) must succeed within
    /// `timeout`. Starting the service by D-Bus activation counts as answering.
    public static func probe(home: String, timeout: Duration = .seconds(3)) throws(KeyringError) -> SecretServiceKeyring {
        guard let address = getenv("DBUS_SESSION_BUS_ADDRESS"), address.pointee != 0 else {
            throw .unavailable("DBUS_SESSION_BUS_ADDRESS is not set")
        }
        let keyring = SecretServiceKeyring(home: home)
        let cancellable: Cancellable
        do throws(SharedLibraryError) {
            cancellable = Cancellable(api: try LibSecret.api())
        } catch {
            throw .libraryMissing(error)
        }
        let deadline = DispatchWorkItem { cancellable.cancel() }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(timeout.components.seconds * 1_000)),
                                          execute: deadline)
        defer { deadline.cancel() }
        do {
            _ = try keyring.search(flags: SECRET_SEARCH_NONE, cancellable: cancellable)
        } catch {
            if cancellable.isCancelled { throw .unavailable("the Secret Service did not answer within \(timeout)") }
            if case .libraryMissing = error { throw error }
            throw .unavailable(error.reason)
        }
        return keyring
    }

    /// Stores (or replaces) the value of `ref`.
    public func store(ref: String, value: String, label: String) throws(KeyringError) {
        let ok = try call(ref: ref, failing: "cannot store a secret") { api, schema, attributes, error in
            api.secret_password_storev_sync(schema, attributes, SECRET_COLLECTION_DEFAULT, label, value, nil, &error)
        }
        guard ok != 0 else { throw .failed("cannot store a secret") }
    }

    /// The value of `ref`, or nil when there is no such item.
    public func lookup(ref: String) throws(KeyringError) -> String? {
        let (api, value) = try call(ref: ref, failing: "cannot read a secret") { api, schema, attributes, error in
            (api, api.secret_password_lookupv_sync(schema, attributes, nil, &error))
        }
        guard let value else { return nil }
        // secret_password_free wipes the C copy before freeing it.
        defer { api.secret_password_free(value) }
        return String(cString: value)
    }

    /// Deletes the item of `ref`; false if there was none.
    @discardableResult
    public func clear(ref: String) throws(KeyringError) -> Bool {
        let removed = try call(ref: ref, failing: "cannot delete a secret") { api, schema, attributes, error in
            api.secret_password_clearv_sync(schema, attributes, nil, &error)
        }
        return removed != 0
    }

    /// The references of all of this installation's items (locked ones included; reading attributes never prompts).
    public func refs() throws(KeyringError) -> Set<String> {
        try search(flags: SECRET_SEARCH_ALL, cancellable: nil)
    }

    /// Drops libsecret's shared connection to the service (for tests that stop their private bus). Does nothing
    /// when libsecret is not loaded (there is no connection then).
    public static func disconnect() {
        guard case .success(let api) = LibSecret.shared else { return }
        api.secret_service_disconnect()
    }

    // MARK: - libsecret plumbing

    /// One libsecret call on this installation's items (`ref` nil: all of them): libsecret is loaded (once per
    /// process), the bus is made ready, the schema and attribute table are built and released around `body`, and a
    /// GError becomes a KeyringError.
    func call<Result>(ref: String?, cancellable: Cancellable? = nil, failing what: String,
                      _ body: (sb_secret_api, UnsafeMutablePointer<SecretSchema>, OpaquePointer,
                               inout UnsafeMutablePointer<GError>?) -> Result) throws(KeyringError) -> Result {
        let api: sb_secret_api
        do throws(SharedLibraryError) { api = try LibSecret.api() } catch { throw .libraryMissing(error) }
        try prepareBus(api, cancellable: cancellable)
        let schema = Self.newSchema(api)
        defer { api.secret_schema_unref(schema) }
        let attributes = attributeTable(api, ref: ref)
        defer { api.g_hash_table_unref(attributes) }
        var error: UnsafeMutablePointer<GError>?
        let result = body(api, schema, attributes, &error)
        try check(api, error == nil, error, what)
        return result
    }

    func search(flags: SecretSearchFlags, cancellable: Cancellable?) throws(KeyringError) -> Set<String> {
        let (api, list) = try call(ref: nil, cancellable: cancellable, failing: "cannot list secrets") {
            api, schema, attributes, error in
            (api, api.secret_password_searchv_sync(schema, attributes, flags, cancellable?.pointer, &error))
        }
        defer { api.g_list_free_full(list, api.g_object_unref) }
        var refs: Set<String> = []
        var node = list
        while let item = node {
            // Each element is a SecretRetrievable (a GObject interface: imported as an opaque pointer).
            if let found = api.secret_retrievable_get_attributes(OpaquePointer(item.pointee.data)) {
                if let ref = api.g_hash_table_lookup(found, "ref") {
                    refs.insert(String(cString: ref.assumingMemoryBound(to: CChar.self)))
                }
                api.g_hash_table_unref(found)
            }
            node = item.pointee.next
        }
        return refs
    }

    /// `secret_schema_new` is variadic (not callable from Swift); `secret_schema_newv` takes a GHashTable of
    /// attribute name → type. `SECRET_SCHEMA_ATTRIBUTE_STRING` is 0, so the table's values are NULL.
    static func newSchema(_ api: sb_secret_api) -> UnsafeMutablePointer<SecretSchema> {
        let types = api.g_hash_table_new_full(api.g_str_hash, api.g_str_equal, api.g_free, nil)
        defer { api.g_hash_table_unref(types) }
        for name in ["home", "ref"] {
            let type = UnsafeMutableRawPointer(bitPattern: Int(SECRET_SCHEMA_ATTRIBUTE_STRING.rawValue))
            _ = api.g_hash_table_insert(types, api.g_strdup(name), type)
        }
        // Never NULL: glib aborts on out-of-memory (the direct call's implicitly unwrapped result did the same).
        return api.secret_schema_newv(schemaName, SECRET_SCHEMA_NONE, types)!
    }

    /// `home` and, if given, `ref`, as the GHashTable (string → string) the `*v_sync` calls take.
    func attributeTable(_ api: sb_secret_api, ref: String?) -> OpaquePointer {
        let table = api.g_hash_table_new_full(api.g_str_hash, api.g_str_equal, api.g_free, api.g_free)!
        _ = api.g_hash_table_insert(table, api.g_strdup("home"), UnsafeMutableRawPointer(api.g_strdup(home)))
        if let ref { _ = api.g_hash_table_insert(table, api.g_strdup("ref"), UnsafeMutableRawPointer(api.g_strdup(ref))) }
        return table
    }

    /// Turns off GDBus's exit-on-close on the shared session connection (see the type's comment) and reports a bus
    /// that cannot be reached as `.unavailable`.
    func prepareBus(_ api: sb_secret_api, cancellable: Cancellable? = nil) throws(KeyringError) {
        var error: UnsafeMutablePointer<GError>?
        guard let bus = api.g_bus_get_sync(G_BUS_TYPE_SESSION, cancellable?.pointer, &error) else {
            let message = error.map { String(cString: $0.pointee.message) } ?? "unknown error"
            api.g_clear_error(&error)
            throw .unavailable("cannot connect to the session bus: \(message)")
        }
        api.g_dbus_connection_set_exit_on_close(bus, 0)
        api.g_object_unref(UnsafeMutableRawPointer(bus))
    }

    func check(_ api: sb_secret_api, _ ok: Bool, _ error: UnsafeMutablePointer<GError>?,
               _ what: String) throws(KeyringError) {
        var error = error
        guard let e = error else {
            if ok { return }
            throw .failed(what)
        }
        let message = String(cString: e.pointee.message)
        api.g_clear_error(&error)
        throw .failed("\(what): \(message)")
    }
}

extension KeyringError {
    var reason: String {
        switch self {
        case .unavailable(let why), .failed(let why): why
        case .libraryMissing(let error): error.description
        }
    }
}

/// A GCancellable that another thread may cancel (g_cancellable_cancel is thread-safe; the pointer and the table
/// of function pointers are only read).
final class Cancellable: @unchecked Sendable {
    private let api: sb_secret_api
    let pointer: UnsafeMutablePointer<GCancellable>

    init(api: sb_secret_api) {
        self.api = api
        pointer = api.g_cancellable_new()!          // never NULL: GObject allocation aborts on out-of-memory
    }

    func cancel() { api.g_cancellable_cancel(pointer) }
    var isCancelled: Bool { api.g_cancellable_is_cancelled(pointer) != 0 }

    deinit { api.g_object_unref(pointer) }
}
