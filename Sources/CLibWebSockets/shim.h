// CLibWebSockets: the one header SpeakBridgeWebSocket imports.
//
// libwebsockets is not linked (the modulemap has no `link`, Package.swift no pkgConfig): linked, it made every
// process load and bind it and what it links, OpenSSL's libssl and libcrypto above all (about 4,500 symbol
// bindings, ~2 ms of a start on the development VM), before `main`, although `--version`, `status`, `pair` and
// the control commands never use it. SpeakBridgeWebSocket dlopens libwebsockets.so.17 (LibWebSockets.swift, with
// SharedLibrary's rules), on the service thread of its first loop, so a `send` reads its identity, journal and
// peers meanwhile. The headers still give the types and constants; the functions are reached through `struct sb_lws_api`, filled by
// dlsym. Calling one of them directly from Swift fails at link time (undefined symbol), which keeps every call
// going through the table.
//
// Everything else below the #include exists only because Swift cannot reach it directly
// (see /work/shared/C-LIBRARY-NOTES.md §1 pitfalls 3 and 6). Each item can go when the
// reason given next to it stops being true.
#ifndef SPEAKBRIDGE_CLIBWEBSOCKETS_SHIM_H
#define SPEAKBRIDGE_CLIBWEBSOCKETS_SHIM_H

#include <dlfcn.h>
#include <stddef.h>
#include <libwebsockets.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <unistd.h>

/// Headroom lws needs in front of every payload given to lws_write().
/// LWS_PRE expands through _LWS_PAD(), a computed macro, which Swift does not import.
enum { SWIFT_LWS_PRE = LWS_PRE };

// Every libwebsockets function SpeakBridgeWebSocket calls, once. X(name) for each.
#define SB_LWS_SYMBOLS(X) \
    X(lws_create_context) \
    X(lws_context_destroy) \
    X(lws_context_user) \
    X(lws_get_context) \
    X(lws_service) \
    X(lws_cancel_service) \
    X(lws_create_vhost) \
    X(lws_get_vhost_by_name) \
    X(lws_get_vhost_listen_port) \
    X(lws_client_connect_via_info) \
    X(lws_adopt_descriptor_vhost_via_info) \
    X(lws_callback_http_dummy) \
    X(lws_callback_on_writable) \
    X(lws_write) \
    X(lws_partial_buffered) \
    X(lws_close_reason) \
    X(lws_set_timeout) \
    X(lws_rx_flow_control) \
    X(lws_remaining_packet_payload) \
    X(lws_frame_is_binary) \
    X(lws_is_final_fragment) \
    X(lws_is_ssl) \
    X(lws_return_http_status) \
    X(lws_get_opaque_user_data) \
    X(lws_set_opaque_user_data) \
    X(lws_get_protocol) \
    X(lws_get_socket_fd) \
    X(lws_get_peer_simple) \
    X(lws_hdr_total_length) \
    X(lws_hdr_copy) \
    X(lws_sul_schedule) \
    X(lws_sul_cancel) \
    X(lws_set_log_level) \
    X(_lws_log)

// One non-null function pointer per symbol, typed from the library's own declaration (__typeof__), so the Swift
// side calls them with exactly the header's signatures: `lws.lws_write(wsi, buffer, length, protocol)`.
#define SB_LWS_FIELD(name) __typeof__(name) *_Nonnull name;
struct sb_lws_api {
    SB_LWS_SYMBOLS(SB_LWS_FIELD)
};
#undef SB_LWS_FIELD

// Fills *api from `handle` (a dlopen handle of libwebsockets.so.17). Returns NULL when every symbol was found,
// else the name of the first missing one (then *api is partly written and must not be used).
#define SB_LWS_RESOLVE(name) \
    if ((api->name = (__typeof__(name) *)dlsym(handle, #name)) == NULL) return #name;
static inline const char *_Nullable sb_lws_resolve(void *_Nonnull handle, struct sb_lws_api *_Nonnull api) {
    SB_LWS_SYMBOLS(SB_LWS_RESOLVE)
    return NULL;
}
#undef SB_LWS_RESOLVE

/// Emits one line through lws's logger (and so through the emit hook set with
/// lws_set_log_level). _lws_log() is variadic, which Swift cannot call.
static inline void swift_lws_log(const struct sb_lws_api *_Nonnull api, int level, const char *_Nonnull message) {
    api->_lws_log(level, "%s\n", message);
}

/// The kernel thread id of the calling thread. gettid() is missing from Swift's Glibc module,
/// and syscall() is variadic.
static inline pid_t swift_gettid(void) {
    return (pid_t)syscall(SYS_gettid);
}

/// Names the calling thread (visible in /proc/self/task/TID/comm, top, gdb; at most 15
/// bytes). pthread_setname_np needs _GNU_SOURCE, which Swift's Glibc module is not built
/// with, and prctl() is variadic.
static inline int swift_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

/// An lws_sul timer that knows its owner. lws hands the callback only the
/// lws_sorted_usec_list_t pointer; keeping it as the first member lets the callback
/// get back to the owner without pointer arithmetic in Swift.
typedef struct swift_lws_timer {
    lws_sorted_usec_list_t sul;
    void *owner;
} swift_lws_timer;

static inline void *swift_lws_timer_owner(lws_sorted_usec_list_t *sul) {
    return ((swift_lws_timer *)sul)->owner;
}

#endif
