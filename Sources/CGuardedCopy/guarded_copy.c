// See include/guarded_copy.h for what this is and why it is C.
#define _GNU_SOURCE
#include "guarded_copy.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

// The copy in progress on this thread: where to jump back to, and the mapping whose faults are its own. Set and
// cleared only by `sb_guarded_copy` on its own thread; the handler runs on the faulting thread (a SIGBUS from a
// store is synchronous), so it reads the faulting thread's values.
static _Thread_local sigjmp_buf *volatile active_jump;
static _Thread_local const char *active_low;
static _Thread_local const char *active_high;

static struct sigaction previous;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int install_result = -1;
static int install_errno = 0;

static void on_sigbus(int signal_number, siginfo_t *info, void *context) {
    sigjmp_buf *jump = active_jump;
    const char *address = info != NULL ? (const char *)info->si_addr : NULL;
    if (jump != NULL && address >= active_low && address < active_high) {
        active_jump = NULL;
        siglongjmp(*jump, 1);
    }
    // Not a guarded copy's fault: what the process would have done without this handler.
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(signal_number, info, context);
        return;
    }
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(signal_number);
        return;
    }
    // The default action. A fault's instruction runs again on return and faults again, now with the default
    // disposition (the kernel never ignores a synchronous SIGBUS); a SIGBUS sent by a process is raised again.
    signal(SIGBUS, SIG_DFL);
    if (info == NULL || info->si_code <= 0) raise(SIGBUS);
}

static void install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sigbus;
    sigemptyset(&action.sa_mask);
    // SA_NODEFER: SIGBUS is not blocked while the handler runs, so leaving it by siglongjmp (which, from a
    // sigsetjmp(…, 0), does not restore a mask) leaves the thread's mask as it was. SA_ONSTACK: a thread with an
    // alternate signal stack (the Swift runtime's crash handling may set one) uses it.
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    if (sigaction(SIGBUS, &action, &previous) == 0) {
        install_result = 0;
    } else {
        install_errno = errno;
    }
}

int sb_guarded_copy_install(void) {
    pthread_once(&once, install);
    if (install_result != 0) errno = install_errno;
    return install_result;
}

int sb_guarded_copy(void *destination, const void *source, size_t count, const void *low, const void *high) {
    sigjmp_buf jump;
    // 0: the signal mask is not saved (that would be a system call per copy); see SA_NODEFER above.
    if (sigsetjmp(jump, 0) != 0) {
        return -1;  // the handler cleared `active_jump`
    }
    active_low = (const char *)low;
    active_high = (const char *)high;
    active_jump = &jump;
    // The fences keep the compiler from moving the copy's stores out from between the two assignments (a fault
    // outside them would not be taken as this copy's).
    atomic_signal_fence(memory_order_seq_cst);
    memcpy(destination, source, count);
    atomic_signal_fence(memory_order_seq_cst);
    active_jump = NULL;
    return 0;
}
