// CGuardedCopy: a memcpy into a shared file mapping that returns an error instead of killing the process when the
// kernel answers a store with SIGBUS. Used by exactly one Swift type, SpeakBridgeStore's `LogFile`.
//
// Why C: a store into a MAP_SHARED file mapping that the kernel cannot back (no space for a copy-on-write filesystem's
// new block, a read error paging the file back in, the file cut short by someone else) is not an error return but a
// SIGBUS at the instruction that stored. Recovering means leaving the faulting copy from the signal handler
// (siglongjmp), which Swift cannot express and must never do across Swift frames: here the only frames between the
// sigsetjmp and the fault are this file's function and memcpy, which hold no lock and no state.
#ifndef SPEAKBRIDGE_GUARDED_COPY_H
#define SPEAKBRIDGE_GUARDED_COPY_H

#include <stddef.h>

/// Installs the process's SIGBUS handler once (later calls only return the first call's result): 0 when installed,
/// -1 with errno set when sigaction(2) failed (then `sb_guarded_copy` must not be used). A SIGBUS that is not a
/// guarded copy's goes on as the handler found at installation would have taken it (that handler, or the default
/// action: the process ends with SIGBUS as without this handler).
int sb_guarded_copy_install(void);

/// Copies `count` bytes from `source` to `destination`, which lies inside the mapping [`low`, `high`). Returns 0,
/// or -1 when a SIGBUS for an address in [`low`, `high`) stopped the copy: then any prefix of the bytes may have been
/// stored. Only after `sb_guarded_copy_install` returned 0. Async-signal-safe state only: a per-thread pointer.
int sb_guarded_copy(void *destination, const void *source, size_t count, const void *low, const void *high);

#endif
