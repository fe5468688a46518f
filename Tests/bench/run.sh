#!/usr/bin/env bash
# make bench: end-to-end latency (send's stdin -> daemon's FIFO) with raw socat over TCP beside it as the floor,
# burst throughput with durability on, idle CPU and RSS of the daemon. Loopback only; cleans up what it started.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-$here/../../.build/release/speakbridge}
exec python3 "$here/bench.py" --bin "$BIN" "$@"
