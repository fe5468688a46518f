#!/usr/bin/env bash
# Builds and runs the libFuzzer targets (Fuzz/README.md). Usage, from the repository root:
#   Fuzz/run.sh build              build every target (release, -sanitize=fuzzer,address) into .build-fuzz
#   Fuzz/run.sh short              each target for FUZZ_SECONDS (default 3) seconds: the regression run of `make test`
#   Fuzz/run.sh long               each target for its share of FUZZ_TOTAL_RUNS executions (default 10,000,000)
#   Fuzz/run.sh merge              rewrite Fuzz/corpus/ as the fewest inputs covering every edge reached so far
#   Fuzz/run.sh seeds              rewrite the seeds from Pairing/vectors/ (Fuzz/seeds.py)
# FUZZ_TARGETS="FuzzJSON FuzzResponder" restricts any of them to some targets.
#
# Flow of a run: for each target, libFuzzer reads the committed corpus (Fuzz/corpus/<target>, never written here)
# and a scratch corpus (.build-fuzz/corpus/<target>, where new inputs go), runs, and prints its final stats; the
# summary table gives executions, coverage (cov = edges, ft = features), corpus size, time and rate per target.
# Any crash, failed invariant, leak, timeout or out-of-memory makes libFuzzer exit non-zero: the reproducer is
# written to .build-fuzz/artifacts/ and this script fails. Reproduce one with: .build-fuzz/release/<target> <file>
set -uo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
SCRATCH=${FUZZ_SCRATCH:-.build-fuzz}
ALL_TARGETS="FuzzPairingCode FuzzJSON FuzzMessageCodec FuzzConfigWire FuzzResponder FuzzMessageReassembler"
TARGETS=${FUZZ_TARGETS:-$ALL_TARGETS}

# Share of the long run per target, in per mille of FUZZ_TOTAL_RUNS: the cheap parsers get most of the
# executions, the responder (two X25519 handshakes per constructed input) the fewest.
share() {
    case "$1" in
        FuzzPairingCode) echo 250 ;; FuzzJSON) echo 250 ;; FuzzMessageCodec) echo 250 ;;
        FuzzConfigWire) echo 150 ;; FuzzResponder) echo 50 ;; FuzzMessageReassembler) echo 50 ;; *) echo 100 ;;
    esac
}

# Not SwiftPM's `--sanitize=fuzzer --sanitize=address` alone: swiftc then gets two -sanitize= flags and the 6.3
# driver hands only the last one to the frontend, so the code builds and links with libFuzzer but has no coverage
# counters ("Is the code instrumented for coverage?") and the fuzzer runs blind. `--sanitize=fuzzer` tells SwiftPM
# to link libFuzzer's main instead of its own empty one; the last -sanitize= flag, `fuzzer,address`, is the one
# that counts for compiling and linking. lld, because gold warns about an ASan symbol it cannot export.
build() {
    for t in $TARGETS; do
        "$SWIFT" build -c release --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld --product "$t" --scratch-path "$SCRATCH" \
            2>&1 | grep -v '^\[' || true
        [ -x "$SCRATCH/release/$t" ] || { echo "fuzz: error: $t did not build" >&2; exit 1; }
        # A fuzzer without coverage counters runs blind and finds nothing: refuse it.
        nm "$SCRATCH/release/$t" 2>/dev/null | grep __sancov_gen_ >/dev/null || {
            echo "fuzz: error: $t has no coverage instrumentation" >&2; exit 1; }
    done
}

# run TARGET LIBFUZZER-ARGS...: one fuzzing run; appends a line to $SUMMARY; returns libFuzzer's status.
run() {
    local t=$1; shift
    local work="$SCRATCH/corpus/$t" artifacts="$SCRATCH/artifacts" log="$SCRATCH/logs/$t.log"
    mkdir -p "$work" "$artifacts" "$SCRATCH/logs"
    local start end status
    start=$(date +%s.%N)
    "$SCRATCH/release/$t" "$work" "Fuzz/corpus/$t" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$artifacts/$t-" "$@" >"$log" 2>&1
    status=$?
    end=$(date +%s.%N)
    local execs cov ft corp
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    corp=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    local seconds rate
    seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
    rate=$(awk -v n="${execs:-0}" -v a="$start" -v b="$end" 'BEGIN { printf "%d", n / (b - a) }')
    printf '%-23s %12s %7s %7s %6s %9s %10s %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" \
        "$seconds" "$rate" "$( [ $status = 0 ] && echo ok || echo "FAILED ($log)")" >>"$SUMMARY"
    if [ $status != 0 ]; then
        echo "fuzz: error: $t failed (exit $status); last lines of $log:" >&2
        grep -E 'ERROR|Fatal error|Precondition|SUMMARY|Test unit written|artifact' "$log" | head -20 >&2
    fi
    return $status
}

fuzz_all() {
    SUMMARY=$(mktemp)
    local failed=0 total=0
    printf '%-23s %12s %7s %7s %6s %9s %10s %s\n' target execs cov ft corpus seconds "execs/s" result >"$SUMMARY"
    for t in $TARGETS; do
        if [ "$1" = short ]; then
            run "$t" -max_total_time="${FUZZ_SECONDS:-3}" || failed=1
        else
            local runs=$(( ${FUZZ_TOTAL_RUNS:-10000000} * $(share "$t") / 1000 ))
            run "$t" -runs="$runs" || failed=1
        fi
    done
    cat "$SUMMARY"
    total=$(awk 'NR > 1 && $2 ~ /^[0-9]+$/ { s += $2 } END { print s + 0 }' "$SUMMARY")
    echo "total executions: $total"
    rm -f "$SUMMARY"
    return $failed
}

case "${1:-}" in
    build) build ;;
    short) build && fuzz_all short ;;
    long) build && fuzz_all long ;;
    merge)
        # The committed corpus stays small: the fewest inputs that still reach every coverage edge that the
        # committed corpus and the last runs reached (hit counts and comparison features are not kept).
        for t in $TARGETS; do
            merged="$SCRATCH/merge/$t"
            rm -rf "$merged" && mkdir -p "$merged" "$SCRATCH/corpus/$t"
            "$SCRATCH/release/$t" -set_cover_merge=1 -use_counters=0 -use_cmp=0 "$merged" "Fuzz/corpus/$t" \
                "$SCRATCH/corpus/$t" >"$SCRATCH/merge/$t.log" 2>&1 || { echo "fuzz: error: merge of $t failed" >&2; exit 1; }
            find "Fuzz/corpus/$t" -type f -delete
            cp "$merged"/* "Fuzz/corpus/$t/"
            echo "$t: $(ls "Fuzz/corpus/$t" | wc -l) inputs ($(grep -o '[0-9]* new coverage edges' "$SCRATCH/merge/$t.log"))"
        done ;;
    seeds) python3 Fuzz/seeds.py ;;
    *) sed -n '2,8p' "$0" >&2; exit 2 ;;
esac
