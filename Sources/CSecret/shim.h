// libsecret for SpeakBridgeKeyring (the only target that imports CSecret). No wrappers: the variadic calls
// (secret_password_store_sync, secret_schema_new, …) are avoided by using the `*v_sync` variants, which take
// the attributes as a GHashTable, and secret_schema_newv.
#include <libsecret/secret.h>
