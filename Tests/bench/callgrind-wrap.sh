#!/bin/bash
# Runs $SB_BIN; under callgrind for `serve` when CG_DESK=1 and for a streaming `send` when CG_SEND=1.
B=${SB_BIN:?set SB_BIN to a speakbridge binary}
O=${CG_OUT:-/tmp}
if [ "$1" = serve ] && [ -n "$CG_DESK" ]; then exec valgrind --tool=callgrind $CG_ARGS --callgrind-out-file=$O/cg-desk.%p "$B" "$@"; fi
if [ "$1" = send ] && [ -n "$CG_SEND" ] && [ "$3" != "--text" ]; then exec valgrind --tool=callgrind $CG_ARGS --callgrind-out-file=$O/cg-send.%p "$B" "$@"; fi
exec "$B" "$@"
