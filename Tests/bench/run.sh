#!/usr/bin/env bash
# make bench: speakbridge beside socat (raw TCP) and ssh (a private sshd on loopback) in the same run: latency,
# burst, first line, CPU per line, idle RSS, one-shot send, syscalls per line, a per-stage trace (bench.py).
# Loopback only; cleans up what it started.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-$here/../../.build/release/speakbridge}
exec python3 "$here/bench.py" --bin "$BIN" "$@"
