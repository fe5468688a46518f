// avahi-client for SpeakBridgeDiscovery (the only target that imports CAvahi).
// The variadic avahi functions are avoided on the Swift side (TXT lists are built with
// avahi_string_list_add_pair), so no wrappers are needed.
//
// avahi is not linked (the modulemap has no `link`): linking it made every process load avahi-client,
// avahi-common, libdbus, libsystemd, libgcrypt, … at start-up, although only mDNS (serve without --no-mdns,
// discover, and the client's search for a desktop whose address changed) uses it. The headers still give the
// types; the functions are reached through `struct sb_avahi_api`, filled by dlsym from the handle of
// libavahi-client.so.3 (whose dependency avahi-common is searched too, so avahi_strerror, avahi_free, the
// string lists and the threaded poll are found through the same handle). Calling one of these functions directly
// from Swift would fail at link time (undefined symbol), which keeps every call going through the table.
#include <dlfcn.h>
#include <stddef.h>
#include <avahi-client/client.h>
#include <avahi-client/lookup.h>
#include <avahi-client/publish.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/alternative.h>
#include <avahi-common/strlst.h>
#include <avahi-common/thread-watch.h>
#include <avahi-common/address.h>
// avahi_elapse_time: AvahiPoll timeouts take an absolute time.
#include <avahi-common/timeval.h>

// Every function SpeakBridgeDiscovery calls, once. X(name) for each.
#define SB_AVAHI_SYMBOLS(X) \
    X(avahi_threaded_poll_new) \
    X(avahi_threaded_poll_get) \
    X(avahi_threaded_poll_start) \
    X(avahi_threaded_poll_stop) \
    X(avahi_threaded_poll_lock) \
    X(avahi_threaded_poll_unlock) \
    X(avahi_threaded_poll_free) \
    X(avahi_client_new) \
    X(avahi_client_free) \
    X(avahi_client_errno) \
    X(avahi_client_get_state) \
    X(avahi_entry_group_new) \
    X(avahi_entry_group_add_service_strlst) \
    X(avahi_entry_group_commit) \
    X(avahi_entry_group_reset) \
    X(avahi_entry_group_get_client) \
    X(avahi_service_browser_new) \
    X(avahi_service_browser_free) \
    X(avahi_service_resolver_new) \
    X(avahi_service_resolver_free) \
    X(avahi_alternative_service_name) \
    X(avahi_string_list_add_pair) \
    X(avahi_string_list_free) \
    X(avahi_string_list_get_next) \
    X(avahi_string_list_get_size) \
    X(avahi_string_list_get_text) \
    X(avahi_address_snprint) \
    X(avahi_elapse_time) \
    X(avahi_strerror) \
    X(avahi_free)

// One non-null function pointer per symbol, typed from the library's own declaration (__typeof__), so the Swift
// side calls them with exactly the header's signatures: `avahi.avahi_client_free(client)`.
#define SB_AVAHI_FIELD(name) __typeof__(name) *_Nonnull name;
struct sb_avahi_api {
    SB_AVAHI_SYMBOLS(SB_AVAHI_FIELD)
};
#undef SB_AVAHI_FIELD

// Fills *api from `handle` (a dlopen handle of libavahi-client.so.3). Returns NULL when every symbol was found,
// else the name of the first missing one (then *api is partly written and must not be used).
#define SB_AVAHI_RESOLVE(name) \
    if ((api->name = (__typeof__(name) *)dlsym(handle, #name)) == NULL) return #name;
static inline const char *_Nullable sb_avahi_resolve(void *_Nonnull handle, struct sb_avahi_api *_Nonnull api) {
    SB_AVAHI_SYMBOLS(SB_AVAHI_RESOLVE)
    return NULL;
}
#undef SB_AVAHI_RESOLVE
