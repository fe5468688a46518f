// libsecret for SpeakBridgeKeyring (the only target that imports CSecret). The variadic calls
// (secret_password_store_sync, secret_schema_new, …) are avoided by using the `*v_sync` variants, which take
// the attributes as a GHashTable, and secret_schema_newv.
//
// libsecret is not linked (the modulemap has no `link`): linking it made every process load glib, gobject, gio,
// libsecret and what they pull in (libmount, libblkid, libselinux, libgcrypt, …), about 7,000 symbol bindings at
// start-up and a few MiB of resident memory, even though only config transfer with a Secret Service uses it.
// The headers still give the types; the functions are reached through `struct sb_secret_api`, filled by dlsym
// from the handle of libsecret-1.so.0 (whose dependencies glib, gobject and gio are searched too, so the g_*
// functions are found through the same handle). Calling one of these functions directly from Swift would fail
// at link time (undefined symbol), which keeps every call going through the table.
#include <dlfcn.h>
#include <stddef.h>
#include <libsecret/secret.h>

// Every function SpeakBridgeKeyring calls, once. X(name) for each.
#define SB_SECRET_SYMBOLS(X) \
    X(secret_password_storev_sync) \
    X(secret_password_lookupv_sync) \
    X(secret_password_clearv_sync) \
    X(secret_password_searchv_sync) \
    X(secret_password_free) \
    X(secret_retrievable_get_attributes) \
    X(secret_service_disconnect) \
    X(secret_schema_newv) \
    X(secret_schema_unref) \
    X(g_hash_table_new_full) \
    X(g_hash_table_insert) \
    X(g_hash_table_lookup) \
    X(g_hash_table_unref) \
    X(g_str_hash) \
    X(g_str_equal) \
    X(g_strdup) \
    X(g_free) \
    X(g_list_free_full) \
    X(g_object_unref) \
    X(g_clear_error) \
    X(g_bus_get_sync) \
    X(g_dbus_connection_set_exit_on_close) \
    X(g_cancellable_new) \
    X(g_cancellable_cancel) \
    X(g_cancellable_is_cancelled)

// One non-null function pointer per symbol, typed from the library's own declaration (__typeof__), so the Swift
// side calls them with exactly the header's signatures: `api.secret_password_free(p)`.
#define SB_SECRET_FIELD(name) __typeof__(name) *_Nonnull name;
struct sb_secret_api {
    SB_SECRET_SYMBOLS(SB_SECRET_FIELD)
};
#undef SB_SECRET_FIELD

// Fills *api from `handle` (a dlopen handle of libsecret-1.so.0). Returns NULL when every symbol was found, else
// the name of the first missing one (then *api is partly written and must not be used).
#define SB_SECRET_RESOLVE(name) \
    if ((api->name = (__typeof__(name) *)dlsym(handle, #name)) == NULL) return #name;
static inline const char *_Nullable sb_secret_resolve(void *_Nonnull handle, struct sb_secret_api *_Nonnull api) {
    SB_SECRET_SYMBOLS(SB_SECRET_RESOLVE)
    return NULL;
}
#undef SB_SECRET_RESOLVE
