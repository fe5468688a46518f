#!/usr/bin/env bash
# Runs the Swift suite (`swift test --skip-build`, its arguments passed on) in two runs: every module but
# EndToEndTests, then EndToEndTests. Why two: Swift Testing runs tests on the cooperative thread pool (as wide as the
# machine has CPUs: 2 here), and an end-to-end test blocks its thread for its whole length (real processes, waits of
# up to 35 s); with both threads taken by them, the WebSocket tests' awaits could not resume, and tests of a few
# milliseconds exceeded their 1-minute time limits (twice in a row on 2026-12-07, once the end-to-end tests held
# more long waits). Apart, the unit tests' awaits always find a thread.
# When a run fails, every issue it recorded is printed once more at the very end: a run of 800 tests prints
# thousands of lines, and a CI log that keeps only its tail would otherwise show the summary line ("failed with
# 10 issues") without saying which.
set -uo pipefail
log=$(mktemp /tmp/sb-swift-test-XXXXXX.log)
trap 'rm -f "$log"' EXIT
swift_bin=${SWIFT:-swift}
"$swift_bin" test --skip-build "$@" --skip EndToEndTests 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
"$swift_bin" test --skip-build "$@" --filter EndToEndTests 2>&1 | tee -a "$log"
e2e=${PIPESTATUS[0]}
[ "$status" -eq 0 ] && status=$e2e
if [ "$status" -ne 0 ]; then
    echo
    echo "== the Swift suite failed (exit $status); what it recorded, again:"
    # Each issue's first line (test, file:line, expectation) and a crash's last words, cut to fit the tail of a CI
    # log (16 lines of 200 bytes).
    grep -a -E 'recorded an issue|Fatal error|Program crashed|unexpected signal' "$log" | cut -c1-200 | head -n 16
fi
exit "$status"
