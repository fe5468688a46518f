// avahi-client for SpeakBridgeDiscovery (the only target that imports CAvahi).
// Nothing here but includes: the variadic avahi functions are avoided on the Swift
// side (TXT lists are built with avahi_string_list_add_pair), so no wrappers are needed.
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
