#!/usr/bin/env bash
# make bench: speakbridge beside socat (raw TCP) and ssh (a private sshd on loopback) in the same run: latency,
# burst, first line, CPU per line, idle RSS, one-shot send, syscalls per line, a per-stage trace (bench.py).
# Then the goals socat and ssh have no counterpart for: reconnect after a desktop restart (reconnect.py),
# 100 devices streaming at once against one (devices.py), and `discover` on a namespaced LAN with avahi
# (discover.py; skipped, saying why, without root or avahi), and the three tools' latency, CPU per line and burst
# measured taking turns in blocks of 300 lines (tail_interleaved.py: a noisy stretch hits all three alike). Loopback only;
# cleans up what it started. Arguments go to bench.py; BENCH_ONLY=reconnect,devices,discover,tail runs only those
# extra steps. Before and after, the machine's own idle stalls (stalls.py --noise), so that a figure from a stretch
# in which the VM's host was busy says so.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-$here/../../.build/release/speakbridge}
ONLY=${BENCH_ONLY:-bench,tail,reconnect,devices,discover}
want() { [[ ",$ONLY," == *",$1,"* ]]; }
# The machine's own stalls first, idle: on a VM whose host is busy every tail figure below moves with them.
noise() { python3 "$here/stalls.py" --noise "$1"; }
noise "before the bench"
want bench && python3 "$here/bench.py" --bin "$BIN" "$@"
want tail && { echo; python3 "$here/tail_interleaved.py" "$BIN"; }
want reconnect && { echo; python3 "$here/reconnect.py" --bin "$BIN"; }
# 100 `send`s and their journals.
ulimit -n 4096 2>/dev/null || true
want devices && { echo; python3 "$here/devices.py" --bin "$BIN"; }
want discover && { echo; python3 "$here/discover.py" --bin "$BIN"; }
echo; noise "after the bench"
exit 0
