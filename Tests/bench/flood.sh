#!/usr/bin/env bash
# Issue 8, row 3 figures (a benchmark, not a test): a paired device sends 1 GB of chunks without reading acks,
# then a paired device uses 100,000 session IDs (paced by the answers, then as fast as the socket takes them);
# each time another paired device times its acks (one chunk every 10 ms). Prints daemon peak/final RSS, the other
# device's ack p50/p99/max, `status --json` and restart times.
# Targets: daemon RSS < 64 MiB, other device's ack p99 < 50 ms.
#
# The daemon is the release build (BIN, default $SCRATCH/release/speakbridge); the flooding clients are the
# gated `FloodBench` suite of the end-to-end tests (debug test build in SCRATCH, default .build, as in the
# Makefile). Sizes: SPEAKBRIDGE_BENCH_FLOOD_MB (1024), SPEAKBRIDGE_BENCH_SESSIONS (100000). Loopback only; every process it starts is stopped by the suite.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
SWIFT=${SWIFT:-swift}
SCRATCH=${SCRATCH:-.build}
BIN=${BIN:-$root/$SCRATCH/release/speakbridge}
[ -x "$BIN" ] || { echo "speakbridge: error: no daemon binary at $BIN" >&2; echo "speakbridge: hint: swift build -c release" >&2; exit 1; }
cd "$root"
$SWIFT build --build-tests --scratch-path "$SCRATCH" >/dev/null
SPEAKBRIDGE_BENCH_FLOOD=1 SPEAKBRIDGE_BIN="$BIN" $SWIFT test --skip-build --scratch-path "$SCRATCH" --filter FloodBench 2>&1 \
    | grep -E '^(flood|sessions)( unpaced)?:|✘|error' || true
