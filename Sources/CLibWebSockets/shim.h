// CLibWebSockets: the one header SpeakBridgeWebSocket imports.
//
// Everything below the #include exists only because Swift cannot reach it directly
// (see /work/shared/C-LIBRARY-NOTES.md §1 pitfalls 3 and 6). Each item can go when the
// reason given next to it stops being true.
#ifndef SPEAKBRIDGE_CLIBWEBSOCKETS_SHIM_H
#define SPEAKBRIDGE_CLIBWEBSOCKETS_SHIM_H

#include <libwebsockets.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <unistd.h>

/// Headroom lws needs in front of every payload given to lws_write().
/// LWS_PRE expands through _LWS_PAD(), a computed macro, which Swift does not import.
enum { SWIFT_LWS_PRE = LWS_PRE };

/// Emits one line through lws's logger (and so through the emit hook set with
/// lws_set_log_level). _lws_log() is variadic, which Swift cannot call.
static inline void swift_lws_log(int level, const char *message) {
    _lws_log(level, "%s\n", message);
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
