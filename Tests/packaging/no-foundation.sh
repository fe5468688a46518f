#!/usr/bin/env bash
# The speakbridge binary links FoundationEssentials only: never Foundation (swift-corelibs-foundation, with its
# CoreFoundation), FoundationInternationalization or _FoundationICU. ICU's data was most of the release binary
# (87 MB -> see README), and Foundation's start-up and pages were paid by every `send --text` and by the idle
# daemon (issue 13). One `import Foundation` anywhere in the product (ours or a dependency's) brings it all back.
#
# Usage: no-foundation.sh BINARY...
#   a dynamically linked binary (the debug build): its NEEDED entries and every library they load (ldd);
#   a binary with the Swift runtime linked in (the release build): its symbol table (CoreFoundation's
#   __CFInitialize, ICU's calendar, collator, break iterator and date formatter (linked in renamed swift_u…_open),
#   Foundation's own module symbols).
# Exits non-zero, naming what it found, when a binary links any of them.
set -uo pipefail
status=0
for bin in "$@"; do
    if [ ! -x "$bin" ]; then
        echo "FAIL no executable at $bin"; status=1; continue
    fi
    if readelf -d "$bin" | grep -q 'NEEDED.*libswiftCore\.so'; then
        found=$( (readelf -d "$bin" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p'; ldd "$bin" | awk '{ print $1 }') |
                 grep -E '^lib(Foundation|FoundationInternationalization|FoundationNetworking|FoundationXML|_FoundationICU|CoreFoundation)\.so' |
                 sort -u | tr '\n' ' ')
    else
        symbols=$(nm "$bin" 2>/dev/null)
        if ! grep -q ' \$s20FoundationEssentials' <<<"$symbols"; then
            echo "FAIL $bin: no symbol table to inspect (stripped?)"; status=1; continue
        fi
        found=$( (grep -E ' (__CFInitialize|(swift_)?u(cal|col|brk|dat)_open(_[0-9]+)?)$' <<<"$symbols"
                  grep -m 2 -E ' \$s10Foundation[0-9]' <<<"$symbols") | awk '{ print $3 }' | tr '\n' ' ')
    fi
    if [ -n "$found" ]; then
        echo "FAIL $bin links Foundation / ICU: $found"
        echo "     hint: use FoundationEssentials (and Glibc, Dispatch, SpeakBridgeSupport's ThreadLock, Threads, TextTrim)"
        status=1
    else
        echo "ok   $bin links no Foundation, CoreFoundation or ICU"
    fi
done
exit $status
