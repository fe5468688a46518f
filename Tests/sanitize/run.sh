#!/usr/bin/env bash
# make sanitize: the Swift test suite under AddressSanitizer (with LeakSanitizer), then under ThreadSanitizer.
#
# Each sanitizer has its own scratch directory (.build-asan, .build-tsan), so the instrumented build never
# mixes with .build. The end-to-end tests spawn `speakbridge` (and the vector tests `speakbridge-vectors`): they
# run the INSTRUMENTED binaries of the same build (SPEAKBRIDGE_BIN / SPEAKBRIDGE_VECTORS_BIN), so the daemon's
# network, store and sink code is checked too, not only the in-process unit tests.
#
# Every process writes its reports to files (ASAN_OPTIONS / TSAN_OPTIONS log_path=…/reports/<tool>.<pid>), because
# a spawned daemon's stderr is only a test's log file; the run fails if any report file exists, whatever the test
# results, and prints them. Usage: Tests/sanitize/run.sh [address|thread]... (default: both).
# SANITIZE_FILTER=Suite passes --filter to `swift test`.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
SWIFT=${SWIFT:-swift}
SUPP=$ROOT/Tests/sanitize
FILTER=()
[ -n "${SANITIZE_FILTER:-}" ] && FILTER=(--filter "$SANITIZE_FILTER")
failed=0

one() {
    local sanitizer=$1 scratch reports
    case "$sanitizer" in
        address) scratch=.build-asan ;;
        thread) scratch=.build-tsan ;;
        *) echo "sanitize: error: unknown sanitizer $sanitizer (address or thread)" >&2; return 2 ;;
    esac
    reports=$ROOT/$scratch/reports
    rm -rf "$reports"
    mkdir -p "$reports"
    echo "== $sanitizer: build ($scratch)"
    # lld: gold prints a "Cannot export local symbol" warning for each of ~100 ASan runtime symbols.
    "$SWIFT" build --build-tests --sanitize="$sanitizer" -Xswiftc -use-ld=lld --scratch-path "$scratch" 2>&1 \
        | grep -v '^\[' || true
    [ -x "$scratch/debug/speakbridge" ] || { echo "sanitize: error: the $sanitizer build failed" >&2; return 1; }
    echo "== $sanitizer: swift test"
    local status
    # ASan: LeakSanitizer on, with leaks outside our code suppressed (Tests/sanitize/lsan.supp says which and why);
    # fast_unwind_on_malloc=0 so a stack through an uninstrumented C library (lws, gio) is complete.
    # TSan: SWIFT_BACKTRACE=enable=no, or Swift's crash backtracer fork()s under TSan and buries a report in
    # "CHECK failed … ForkChildAfter" (C-LIBRARY-NOTES §5).
    env SPEAKBRIDGE_BIN="$ROOT/$scratch/debug/speakbridge" SPEAKBRIDGE_SANITIZER="$sanitizer" \
        SPEAKBRIDGE_VECTORS_BIN="$ROOT/$scratch/debug/speakbridge-vectors" \
        SWIFT_BACKTRACE=enable=no \
        ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:log_path=$reports/asan" \
        LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0" \
        TSAN_OPTIONS="log_path=$reports/tsan:halt_on_error=0:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp" \
        "$SWIFT" test --skip-build --sanitize="$sanitizer" -Xswiftc -use-ld=lld --scratch-path "$scratch" "${FILTER[@]}" \
        >"$reports/../sanitize-test.log" 2>&1
    status=$?
    grep -E '^(✔|✘|Test Suite|Executed)|passed after|failed after' "$reports/../sanitize-test.log" | tail -5
    local files
    files=$(find "$reports" -type f | sort)
    if [ -n "$files" ]; then
        echo "sanitize: error: $(echo "$files" | wc -l) $sanitizer report file(s):" >&2
        for f in $files; do
            echo "--- $f" >&2
            grep -E 'ERROR|WARNING|SUMMARY|^    #[0-9]+ .*(SpeakBridge|speakbridge|Tests/)' "$f" | head -40 >&2
        done
        failed=1
    fi
    if [ $status != 0 ]; then
        echo "sanitize: error: swift test under $sanitizer exited $status (log: $scratch/sanitize-test.log)" >&2
        failed=1
    fi
    [ -z "$files" ] && [ $status = 0 ] && echo "== $sanitizer: 0 reports, tests passed"
}

for s in "${@:-address thread}"; do
    for t in $s; do one "$t" || failed=1; done
done
exit $failed
