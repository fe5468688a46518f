#!/usr/bin/env bash
# Torture (Tests/torture/README.md): CYCLES kill -9 of the daemon during a stream, then CYCLES of the client; lost
# and duplicated chunks on the transcript file, the jsonl: FIFO as read by the Neovim plugin and the raw fifo:
# sink, against the documented promises. `make torture`: 1,000 cycles each on the release binary; `make test`: 10.
# Closing line "N passed, M failed"; exit 1 when a promise is broken.
#
# Environment: SPEAKBRIDGE_BIN (default .build/debug/speakbridge), CYCLES (default 10), NVIM (default: nvim on
# PATH, Debian's 0.7), and torture.py's own (TORTURE_SINKS, RAW_LOST_WRITES_PER_KILL, RAW_DUP_PER_KILL, TORTURE_RATE).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${SPEAKBRIDGE_BIN:-$ROOT/.build/debug/speakbridge}
CYCLES=${CYCLES:-10}
NVIM=${NVIM:-$(command -v nvim)}
PY=/usr/bin/python3   # Debian's, where python3-pynvim lives

if [ ! -x "$BIN" ] || [ -z "$NVIM" ] || ! "$PY" -c 'import pynvim' 2>/dev/null; then
    echo "FAIL torture needs $BIN, nvim and python3-pynvim (make test installs the packages)"
    echo "0 passed, 1 failed"
    exit 1
fi
exec "$PY" "$ROOT/Tests/torture/torture.py" "$BIN" "$NVIM" "$CYCLES"
