// libqrencode for SpeakBridgeQR (the only target that imports CQREncode).
//
// libqrencode is not linked (the modulemap has no `link`): only `pair` and `serve` (when it shows a pairing code)
// draw QR codes, so `send`, `--version` and the rest should not load and bind it. The header still gives the types;
// the two functions are reached through `struct sb_qrencode_api`, filled by dlsym from the handle of
// libqrencode.so.4. Calling them directly from Swift would fail at link time (undefined symbol).
#include <dlfcn.h>
#include <stddef.h>
#include <qrencode.h>

// Every function SpeakBridgeQR calls, once. X(name) for each.
#define SB_QRENCODE_SYMBOLS(X) \
    X(QRcode_encodeString) \
    X(QRcode_free)

// One non-null function pointer per symbol, typed from the library's own declaration (__typeof__).
#define SB_QRENCODE_FIELD(name) __typeof__(name) *_Nonnull name;
struct sb_qrencode_api {
    SB_QRENCODE_SYMBOLS(SB_QRENCODE_FIELD)
};
#undef SB_QRENCODE_FIELD

// Fills *api from `handle` (a dlopen handle of libqrencode.so.4). Returns NULL when every symbol was found, else the
// name of the first missing one (then *api is partly written and must not be used).
#define SB_QRENCODE_RESOLVE(name) \
    if ((api->name = (__typeof__(name) *)dlsym(handle, #name)) == NULL) return #name;
static inline const char *_Nullable sb_qrencode_resolve(void *_Nonnull handle, struct sb_qrencode_api *_Nonnull api) {
    SB_QRENCODE_SYMBOLS(SB_QRENCODE_RESOLVE)
    return NULL;
}
#undef SB_QRENCODE_RESOLVE
